#!/usr/bin/env python3
"""Writes the .npy instances beside this script, byte by byte (numpy is not needed).

The layout follows numpy/lib/format.py: magic, version, little-endian header length (uint16 for
1.0, uint32 for 2.0/3.0), a Python dict literal padded with spaces to a 64-byte boundary, data.
Run it again after changing a case; the outputs are committed so tests need no Python.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
VALUES = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]  # a 2x3 matrix, row-major
F8 = struct.pack('<6d', *VALUES)


def header(descr="'<f8'", fortran='False', shape='(2, 3)', quote="'"):
    q = quote
    return '{%sdescr%s: %s, %sfortran_order%s: %s, %sshape%s: %s, }' % (
        q, q, descr, q, q, fortran, q, q, shape)


def npy(text, data, major=1, length=None):
    prefix_size = 10 if major == 1 else 12
    body = text.encode('latin1')
    pad = (64 - (prefix_size + len(body) + 1) % 64) % 64
    body += b' ' * pad + b'\n'
    if length is None:
        length = len(body)
    size = struct.pack('<H', length) if major == 1 else struct.pack('<I', length)
    return b'\x93NUMPY' + bytes([major, 0]) + size + body + data


def write(name, content):
    with open(os.path.join(HERE, name), 'wb') as out:
        out.write(content)


write('good-v1.npy', npy(header(), F8))
write('good-v2.npy', npy(header(), F8, major=2))
write('good-v3.npy', npy(header(), F8, major=3))
# Double quotes, odd spacing, no trailing comma and Python 2 long literals: all valid numpy.
write('good-odd-spacing.npy',
      npy('{ "descr" :"<f8" ,"fortran_order":False,\t"shape" : ( 2L ,3L ) }', F8))
write('float32.npy', npy(header(descr="'<f4'"), struct.pack('<6f', *VALUES)))
write('int64.npy', npy(header(descr="'<i8'"), struct.pack('<6q', 1, 2, 3, 4, 5, 6)))
write('big-endian.npy', npy(header(descr="'>f8'"), struct.pack('>6d', *VALUES)))
write('structured.npy', npy(header(descr="[('x', '<f8')]"), F8))
write('fortran.npy', npy(header(fortran='True'), F8))
write('one-d.npy', npy(header(shape='(6,)'), F8))
write('three-d.npy', npy(header(shape='(1, 2, 3)'), F8))
write('scalar.npy', npy(header(shape='()'), F8[:8]))
write('truncated-data.npy', npy(header(), F8[:40]))
write('extra-data.npy', npy(header(), F8 + b'\0' * 8))
write('bad-magic.npy', b'\x93NUMPZ' + npy(header(), F8)[6:])
write('bad-version.npy', npy(header(), F8)[:6] + b'\x04\x00' + npy(header(), F8)[8:])
write('absurd-header.npy', npy(header(), F8, major=2, length=0xFFFFFFF0))
write('truncated-header.npy', npy(header(), F8)[:40])
write('truncated-prefix.npy', b'\x93NUMP')
# A shape implying 8 TiB of data in a 100-byte file: a reader must not try to allocate it.
write('huge-shape.npy', npy(header(shape='(1099511627776, 1)'), F8))
write('overflow-shape.npy', npy(header(shape='(4294967296, 4294967296)'), F8))
write('malformed-header.npy', npy(header()[:-1], F8))
write('unknown-key.npy', npy(header()[:-1] + "'extra': 1, }", F8))
# A sound 20x10 float64 matrix of ones with one NaN at [12][7]: refused by `tessera multiply`
# (exit 2, naming the position) unless --allow-nonfinite.
ones = [1.0] * 200
ones[12 * 10 + 7] = float('nan')
write('nan-at-12-7.npy', npy(header(shape='(20, 10)'), struct.pack('<200d', *ones)))
# Terminal escapes, a NUL and a byte that is not UTF-8 in the header: messages quote them escaped.
HOSTILE = '\x1b]0;PWNED\x07\x00\x91\x1b[2J'
write('hostile-descr.npy', npy(header(descr="'<f8" + HOSTILE + "'"), F8))
write('hostile-shape.npy', npy(header(shape='(2, ' + HOSTILE + ')'), F8))
