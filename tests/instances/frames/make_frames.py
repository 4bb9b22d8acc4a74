#!/usr/bin/env python3
"""Writes the deliberately broken (and the valid) Tessera v2 frames used by protocol_test.cpp, and
one whole v1 frame that a v2 peer must refuse by its version.

Run from this folder; the .bin files are committed so the tests do not need Python."""
import os
import struct

MAGIC = 0x41525354
VERSION = 2
CAPABILITY_GEMM = 1 << 0


def header(msg_type, length, version=VERSION, flags=0, reserved=0, request_id=0):
    return struct.pack('<IHHIIQQ', MAGIC, version, msg_type, flags, reserved, length, request_id)


def frame(msg_type, payload, **kw):
    return header(msg_type, len(payload), **kw) + payload


def s(text):
    data = text.encode()
    return struct.pack('<H', len(data)) + data


def crc32c(data):
    """CRC32C (Castagnoli, reflected), bit by bit: slow, and plainly the RFC 3720 definition."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def store(tile_id, rows, cols, values, crc=None):
    # v2 tile prefix: tile_id, rows, cols, CRC32C of the data bytes (was reserved, 0, in v1).
    data = struct.pack('<%dd' % len(values), *values)
    return struct.pack('<IIII', tile_id, rows, cols, crc32c(data) if crc is None else crc) + data


def result(job_id, seconds, tile_id, rows, cols, values, crc=None):
    return struct.pack('<Qd', job_id, seconds) + store(tile_id, rows, cols, values, crc)


def job(flags):
    return struct.pack('<QII', 1, 1, flags) + struct.pack('<14I', 1, 2, 3, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0)


def hello(version, load_milli=None):
    # v2 added u64 capabilities between tile_memory_cap and the challenge, and later an optional
    # u32 load_milli after the challenge.
    tail = struct.pack('<IIQQ', 4, 4, 1 << 30, 1 << 29)
    if version >= 2:
        tail += struct.pack('<Q', CAPABILITY_GEMM)
    load = b'' if load_milli is None else struct.pack('<I', load_milli)
    return struct.pack('<H', version) + s('0.1.0') + s('x86_64') + s('pi3') + tail + bytes(range(1, 33)) + load


files = {
    'http_request.bin': b'GET / HTTP/1.1\r\nHost: pi3:7070\r\n\r\n',
    # What a v1 worker sends first: a whole, valid v1 HELLO.
    'version_1.bin': frame(1, hello(1), version=1),
    'unknown_type.bin': header(99, 0),
    'huge_length.bin': header(6, 1 << 63) + bytes(16),
    'store_lying_dims.bin': frame(6, struct.pack('<IIII', 1, 1000000, 1000000, 0) + bytes(48)),
    'hello_string_beyond_payload.bin':
        frame(1, struct.pack('<H', VERSION) + s('0.1.0') + s('x86_64') + struct.pack('<H', 3000) + bytes(64)),
    'hello_truncated.bin': frame(1, hello(VERSION)[:-10]),
    'hello_partial_load.bin': frame(1, hello(VERSION, load_milli=1234)[:-2]),
    'job_unknown_flags.bin': frame(7, job(0x100)),
    'probe_nan_seconds.bin': frame(4, struct.pack('<B3xIdI', 1, 256, float('nan'), 0)),
    'release_count_mismatch.bin': frame(12, struct.pack('<III', 3, 7, 8)),
    'store_bad_crc.bin': frame(6, store(5, 2, 3, [1, 2, 3, 4, 5, 6], crc=0x12345678)),
    'result_bad_crc.bin': frame(9, result(9, 0.25, 8, 2, 2, [1.5, -2, 3, 4], crc=0)),
    'valid_job.bin': frame(7, job(0xE)),
    'valid_store.bin': frame(6, store(5, 2, 3, [1, 2, 3, 4, 5, 6])),
    'valid_result.bin': frame(9, result(9, 0.25, 8, 2, 2, [1.5, -2, 3, 4])),
    'valid_hello.bin': frame(1, hello(VERSION)),
    'valid_hello_load.bin': frame(1, hello(VERSION, load_milli=1234)),
}
if __name__ == '__main__':
    if os.path.exists('version_2.bin'):
        os.remove('version_2.bin')  # stood for "a wrong version" while this build spoke v1
    for name, data in files.items():
        with open(name, 'wb') as out:
            out.write(data)
