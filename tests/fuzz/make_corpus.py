#!/usr/bin/env python3
"""Writes the seed corpora of the libFuzzer harnesses into corpus/<harness>/.

fuzz_codec starts from the broken and valid frames of tests/instances/frames/ plus one valid frame
of every message type, so that every decoder is reached from the first run. fuzz_handshake inputs
are one setting byte (bit 0: the coordinator is the real side; bit 1: the peer knows the secret,
see fuzz_handshake.cpp) followed by the peer's bytes: a coordinator's AUTH or a worker's HELLO +
AUTH_OK, valid and broken. Run from this folder; the output is committed."""
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


def hello():
    return (struct.pack('<H', VERSION) + s('0.1.0') + s('aarch64') + s('pi3') +
            struct.pack('<IIQQQ', 4, 4, 1 << 30, 1 << 29, 1) + bytes(range(1, 33)))


def tile(tile_id, rows, cols):
    data = b''.join(struct.pack('<d', float(i)) for i in range(rows * cols))
    return struct.pack('<IIII', tile_id, rows, cols, crc32c(data)) + data


CODEC = {
    'hello.bin': frame(1, hello()),
    'auth.bin': frame(2, bytes(range(64))),
    'auth_ok.bin': frame(3, bytes(range(32))),
    'probe_echo.bin': frame(4, struct.pack('<B3xIdI', 0, 0, 0.0, 5) + b'hello'),
    'probe_gemm.bin': frame(4, struct.pack('<B3xIdI', 1, 256, 0.5, 0)),
    'probe_result.bin': frame(5, struct.pack('<B3xIIIddI', 1, 256, 10, 0, 0.5, 12.5, 0)),
    'store.bin': frame(6, tile(7, 2, 3)),
    'job.bin': frame(7, struct.pack('<QII', 9, 1, 0xF) + struct.pack('<14I', 1, 2, 3, 0, 0, 0, 0, 0, 0, 2, 3, 2, 2, 3)),
    'credit.bin': frame(8, struct.pack('<QIId', 9, 1, 0, 0.25)),
    'result.bin': frame(9, struct.pack('<Qd', 9, 0.25) + tile(3, 2, 2)),
    'error.bin': frame(10, struct.pack('<I', 7) + s('tile store full')),
    'bye.bin': frame(11, b''),
    'release.bin': frame(12, struct.pack('<III', 2, 1, 2)),
    'stats_request.bin': frame(13, b''),
    'stats.bin': frame(14, struct.pack('<ddddQQQ', 1.0, 0.1, 0.8, 0.9, 12, 4096, 2048)),
}

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
