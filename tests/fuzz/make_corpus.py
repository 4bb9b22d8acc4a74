#!/usr/bin/env python3
"""Writes the seed corpora of the libFuzzer harnesses into corpus/<harness>/.

fuzz_codec starts from the broken and valid frames of tests/instances/frames/ plus one valid frame
of every message type (the GRAPH_* ones included), so that every decoder is reached from the first
run; the graph seeds are also decoded by tests/graph/wire_test.cpp, which checks this independent
encoder against the C++ codec. fuzz_handshake inputs are one setting byte (bit 0: the coordinator
is the real side; bit 1: the peer knows the secret, see fuzz_handshake.cpp) followed by the peer's
bytes: a coordinator's AUTH or a worker's HELLO + AUTH_OK, valid and broken. Run from this folder;
the output is committed."""
import os
import shutil
import sys
import struct

MAGIC = 0x41525354
VERSION = 2
HERE = os.path.dirname(os.path.abspath(__file__))
FRAMES = os.path.join(HERE, '..', 'instances', 'frames')
sys.path.insert(0, FRAMES)
from make_frames import crc32c  # noqa: E402  (the one CRC32C of the frame generators)


def header(msg_type, length, version=VERSION, request_id=0):
    return struct.pack('<IHHIIQQ', MAGIC, version, msg_type, 0, 0, length, request_id)


def frame(msg_type, payload, **kw):
    return header(msg_type, len(payload), **kw) + payload


def s(text):
    data = text.encode()
    return struct.pack('<H', len(data)) + data


def hello(load_milli=None):
    # load_milli: the optional trailing u32 (the host's load average x 1000); absent in older workers.
    load = b'' if load_milli is None else struct.pack('<I', load_milli)
    return (struct.pack('<H', VERSION) + s('0.1.0') + s('aarch64') + s('pi3') +
            struct.pack('<IIQQQ', 4, 4, 1 << 30, 1 << 29, 1) + bytes(range(1, 33)) + load)


def tile(tile_id, rows, cols):
    data = b''.join(struct.pack('<d', float(i)) for i in range(rows * cols))
    return struct.pack('<IIII', tile_id, rows, cols, crc32c(data)) + data


CODEC = {
    'hello.bin': frame(1, hello()),
    'hello_load.bin': frame(1, hello(load_milli=2750)),
    'auth.bin': frame(2, bytes(range(64))),
    'auth_ok.bin': frame(3, bytes(range(32))),
    'probe_echo.bin': frame(4, struct.pack('<B3xIdI', 0, 0, 0.0, 5) + b'hello'),
    'probe_gemm.bin': frame(4, struct.pack('<B3xIdI', 1, 256, 0.5, 0)),
    'probe_result.bin': frame(5, struct.pack('<B3xIIIddI', 1, 256, 10, 0, 0.5, 12.5, 0)),
    'store.bin': frame(6, tile(7, 2, 3)),
    'job.bin': frame(7, struct.pack('<QII', 9, 1, 0xF) + struct.pack('<14I', 1, 2, 3, 0, 0, 0, 0, 0, 0, 2, 3, 2, 2, 3)),
    # op 2 (ADD_SCALED): C[0:2, 0:3] += B[0][0] * A[0:2, 1:4], k = 0.
    'job_add_scaled.bin': frame(7, struct.pack('<QII', 10, 2, 0xF) +
                                struct.pack('<14I', 1, 2, 3, 0, 1, 0, 0, 0, 0, 2, 3, 0, 2, 3)),
    # The transpose flags (bits 4 and 5): the blocks of A^T and B^T are given as stored.
    # C[0:2, 0:3] += A[0:2, 1:3]^T * B[0:2, 0:3]   (A's block k x m)
    'job_transpose_a.bin': frame(7, struct.pack('<QII', 11, 1, 0x1F) +
                                 struct.pack('<14I', 1, 2, 3, 0, 1, 0, 0, 0, 0, 2, 3, 2, 2, 3)),
    # C[0:2, 0:3] += A[0:2, 0:2] * B[1:4, 0:2]^T   (B's block n x k)
    'job_transpose_b.bin': frame(7, struct.pack('<QII', 12, 1, 0x2F) +
                                 struct.pack('<14I', 1, 2, 3, 0, 0, 1, 0, 0, 0, 2, 3, 2, 2, 3)),
    # C[0:2, 0:3] += A[1:3, 0:2]^T * B[0:3, 1:3]^T
    'job_transpose_ab.bin': frame(7, struct.pack('<QII', 13, 1, 0x3F) +
                                  struct.pack('<14I', 1, 2, 3, 1, 0, 0, 1, 0, 0, 2, 3, 2, 2, 3)),
    # op 2 with A^T: C[0:2, 0:3] += B[0][0] * A[1:4, 0:2]^T   (A's block n x m; B^T is refused)
    'job_add_scaled_transpose_a.bin': frame(7, struct.pack('<QII', 14, 2, 0x1F) +
                                            struct.pack('<14I', 1, 2, 3, 1, 0, 0, 0, 0, 0, 2, 3, 0, 2, 3)),
    'credit.bin': frame(8, struct.pack('<QIId', 9, 1, 0, 0.25)),
    'result.bin': frame(9, struct.pack('<Qd', 9, 0.25) + tile(3, 2, 2)),
    'error.bin': frame(10, struct.pack('<I', 7) + s('tile store full')),
    'bye.bin': frame(11, b''),
    'release.bin': frame(12, struct.pack('<III', 2, 1, 2)),
    'stats_request.bin': frame(13, b''),
    'stats.bin': frame(14, struct.pack('<ddddQQQ', 1.0, 0.1, 0.8, 0.9, 12, 4096, 2048)),
}

# The graph service's payloads (graph/wire_codec.hpp), types 15..26.
def graph_progress(running=1):
    return struct.pack('<dd6QddB7x', 0.5, 1e-3, 10, 40, 3, 2, 30, 20, 0.25, 0.5, running)


def graph_load():
    algorithm = struct.pack('<BB6xddq', 4, 3, 0.85, 0.0, 0)  # sssp from vertex 0, max label
    engine = struct.pack('<IIddq', 2, 4096, 0.0, 0.25, 2000)
    part = struct.pack('<IIIIQB7x', 0, 2, 3, 1, 3, 1)  # part 0 of 2: 3 vertices, 1 ghost, 3 weighted edges
    peers = s('127.0.0.1') + struct.pack('<H', 7070) + s('pi-2.local') + struct.pack('<H', 7071)
    arrays = (struct.pack('<4Q', 0, 1, 2, 3) + struct.pack('<3I', 1, 2, 3) + struct.pack('<3d', 1.0, 2.0, 0.5) +
              struct.pack('<2I', 1, 0) + struct.pack('<3d', 0.0, float('inf'), float('inf')) +
              struct.pack('<3d', 0.0, float('inf'), float('inf')))
    return struct.pack('<Q', 7) + algorithm + engine + part + peers + arrays


GRAPH = {
    'graph_load.bin': frame(15, graph_load()),
    'graph_ready.bin': frame(16, struct.pack('<QQ', 7, 4096)),
    'graph_start.bin': frame(17, b''),
    'graph_step.bin': frame(18, struct.pack('<QQ', 3, 2)),
    'graph_step_done.bin': frame(19, struct.pack('<Q', 3) + graph_progress(0) + struct.pack('<I4x2Q', 2, 1, 0)),
    'graph_progress_request.bin': frame(20, struct.pack('<3d', 1e-9, 12.5, 1e-7)),
    'graph_progress.bin': frame(21, graph_progress() + struct.pack('<3Q', 1024, 2048, 1 << 20)),
    'graph_values_request.bin': frame(22, b''),
    'graph_values.bin': frame(23, struct.pack('<QB7x3d', 3, 1, 0.25, 0.5, 0.25)),
    'graph_stop.bin': frame(24, b''),
    'graph_peer_hello.bin': frame(25, struct.pack('<QI4x', 7, 1)),
    'graph_deltas.bin': frame(26, struct.pack('<QQIII4x2I2d', 7, 0, 1, 0, 2, 0, 2, 0.125, 0.5)),
    'graph_probe.bin': frame(27, struct.pack('<4IdQ', 17, 16, 64, 65536, 0.1, 1)),
    'graph_probe_result.bin': frame(28, struct.pack('<6dQd', 4.5e7, 2e-8, 3e-6, 1.5e-8, 2e-6, 1.0, 2097152, 0.4)),
    # The forwarding payloads (gemm/forward_codec.hpp), types 29..33.
    'forward_setup.bin': frame(29, struct.pack('<QIIH2x', 7, 16, 48, 7003) + s('pi-3')),
    'forward_ready.bin': frame(30, struct.pack('<QB7x', 7, 0) + s('connection refused')),
    'forward_stored.bin': frame(31, struct.pack('<QI4x', 7, 17)),
    'forward_send_tile.bin': frame(32, struct.pack('<QIH2x', 7, 17, 7003) + s('pi-3')),
    'forward_sent.bin': frame(33, struct.pack('<QIB3x', 7, 17, 0) + s('connection refused')),
    # The block store's payloads (gemm/block_codec.hpp), types 35..38.
    'block_query.bin': frame(35, struct.pack('<I', 2) + bytes(range(32)) + bytes(range(32, 64))),
    'block_held.bin': frame(36, struct.pack('<I2B', 2, 1, 0)),
    'block_load.bin': frame(37, struct.pack('<I', 1) + bytes(range(32)) + struct.pack('<3I', 0xA0000000, 20, 100)),
    'block_loaded.bin': frame(38, struct.pack('<IB', 1, 1)),
}
CODEC.update(GRAPH)

WORKER_REAL, COORDINATOR_REAL, SIGNED = 0, 1, 2
AUTH = frame(2, bytes(32) + bytes(range(100, 132)))
AUTH_OK = frame(3, bytes(32))
HANDSHAKE = {
    'worker_auth_signed.bin': bytes([WORKER_REAL | SIGNED]) + AUTH,
    'worker_auth_wrong_mac.bin': bytes([WORKER_REAL]) + AUTH,
    'worker_store_first.bin': bytes([WORKER_REAL]) + CODEC['store.bin'],
    'worker_bye.bin': bytes([WORKER_REAL]) + CODEC['bye.bin'],
    'worker_error.bin': bytes([WORKER_REAL]) + CODEC['error.bin'],
    'worker_auth_then_job.bin': bytes([WORKER_REAL | SIGNED]) + AUTH + CODEC['job.bin'],
    'coordinator_signed.bin': bytes([COORDINATOR_REAL | SIGNED]) + CODEC['hello.bin'] + AUTH_OK,
    'coordinator_wrong_mac.bin': bytes([COORDINATOR_REAL]) + CODEC['hello.bin'] + AUTH_OK,
    'coordinator_signed_load.bin': bytes([COORDINATOR_REAL | SIGNED]) + CODEC['hello_load.bin'] + AUTH_OK,
    'coordinator_busy.bin': bytes([COORDINATOR_REAL]) + frame(10, struct.pack('<I', 4) + s('busy')),
    'coordinator_hello_then_error.bin': bytes([COORDINATOR_REAL | SIGNED]) + CODEC['hello.bin'] +
                                        frame(10, struct.pack('<I', 3) + s('wrong secret')),
}


def write(harness, files):
    folder = os.path.join(HERE, 'corpus', harness)
    os.makedirs(folder, exist_ok=True)
    for name, data in files.items():
        with open(os.path.join(folder, name), 'wb') as f:
            f.write(data)


write('fuzz_codec', CODEC)
write('fuzz_handshake', HANDSHAKE)
for name in sorted(os.listdir(FRAMES)):
    if not name.endswith('.bin'):
        continue
    shutil.copy(os.path.join(FRAMES, name), os.path.join(HERE, 'corpus', 'fuzz_codec', 'frame_' + name))
    # Each instance frame is also what a hostile coordinator might send a worker, and vice versa.
    with open(os.path.join(FRAMES, name), 'rb') as f:
        data = f.read()
    write('fuzz_handshake', {'worker_' + name: bytes([WORKER_REAL]) + data,
                             'coordinator_' + name: bytes([COORDINATOR_REAL | SIGNED]) + data})
