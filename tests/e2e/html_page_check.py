#!/usr/bin/env python3
"""Checks for the HTML pages rendered in headless Chromium (tests/e2e/html_e2e.sh), standard library only.

  html_page_check.py png FILE.png [COLOUR...]   the screenshot is not blank: at least MIN_COLOURS distinct
                                                colours each covering MIN_PIXELS pixels, and each COLOUR
                                                (rrggbb, a chart's fill) among them; exit 1 otherwise
  html_page_check.py console FILE.log           no console message in Chromium's log: with
                                                --enable-logging=stderr --v=0 Chromium writes every message
                                                of the page's console (console.log/warn/error, uncaught
                                                errors, failed loads) as a line holding ":CONSOLE"; exit 1
                                                listing them
  html_page_check.py selftest                   the PNG check rejects a blank image and accepts a coloured
                                                one, through every PNG row filter (no Chromium needed)
"""
import struct
import sys
import zlib

MIN_COLOURS = 6
MIN_PIXELS = 100


def read_png(path):
    """(width, height, rows of (r, g, b) tuples) of an 8-bit RGB or RGBA, non-interlaced PNG."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG")
    pos, idat, head = 8, [], None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            head = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = head
    if depth != 8 or colour not in (2, 6) or interlace != 0:
        raise ValueError(f"{path}: depth {depth}, colour type {colour}, interlace {interlace} not supported")
    bpp = 3 if colour == 2 else 4
    return width, height, unfilter(zlib.decompress(b"".join(idat)), width, height, bpp), bpp


def unfilter(raw, width, height, bpp):
    stride = width * bpp
    prev = bytearray(stride)
    rows = []
    for y in range(height):
        ftype = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if ftype == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif ftype == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif ftype == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif ftype == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 255
        elif ftype != 0:
            raise ValueError(f"row {y}: filter type {ftype}")
        rows.append(bytes(line))
        prev = line
    return rows


def colour_counts(rows, bpp):
    counts = {}
    for line in rows:
        for i in range(0, len(line), bpp):
            key = line[i:i + 3]
            counts[key] = counts.get(key, 0) + 1
    return counts


def check_png(path, wanted):
    width, height, rows, bpp = read_png(path)
    counts = colour_counts(rows, bpp)
    common = {k.hex(): n for k, n in counts.items() if n >= MIN_PIXELS}
    problems = []
    if len(common) < MIN_COLOURS:
        problems.append(f"{len(common)} colours of >= {MIN_PIXELS} pixels (needs {MIN_COLOURS}): blank?")
    for w in wanted:
        if w.lower() not in common:
            problems.append(f"colour #{w} missing (or under {MIN_PIXELS} pixels)")
    top = sorted(common.items(), key=lambda kv: -kv[1])[:8]
    print(f"{path}: {width}x{height}, {len(common)} colours of >= {MIN_PIXELS} pixels; most used: "
          + ", ".join(f"#{k} {n}" for k, n in top))
    for p in problems:
        print(f"{path}: {p}")
    return not problems


def check_console(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        bad = [line.rstrip() for line in f if ":CONSOLE" in line]
    for line in bad:
        print(f"{path}: console: {line}")
    return not bad


def write_png(path, rows, filters):
    """An RGB PNG of `rows` (lists of (r, g, b)), each row written with filter filters[y % len(filters)]."""
    width = len(rows[0])
    raw, prev = bytearray(), bytes(width * 3)
    for y, row in enumerate(rows):
        line = bytes(c for px in row for c in px)
        f = filters[y % len(filters)]
        out = bytearray(line)
        for i in range(len(line)):
            a = line[i - 3] if i >= 3 else 0
            b, c = prev[i], (prev[i - 3] if i >= 3 else 0)
            if f == 1:
                out[i] = (line[i] - a) & 255
            elif f == 2:
                out[i] = (line[i] - b) & 255
            elif f == 3:
                out[i] = (line[i] - ((a + b) >> 1)) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                out[i] = (line[i] - (a if pa <= pb and pa <= pc else (b if pb <= pc else c))) & 255
        raw += bytes([f]) + out
        prev = line

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    with open(path, "wb") as fh:
        fh.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, len(rows), 8, 2, 0, 0, 0))
                 + chunk(b"IDAT", zlib.compress(bytes(raw))) + chunk(b"IEND", b""))


def selftest():
    import os
    import tempfile
    palette = [(255, 255, 255), (0x4e, 0x79, 0xa7), (0xf2, 0x8e, 0x2b), (0xe1, 0x57, 0x59), (0x59, 0xa1, 0x4f),
               (0x9c, 0x9c, 0x9c), (0, 0, 0)]
    ok = True
    with tempfile.TemporaryDirectory() as d:
        blank = os.path.join(d, "blank.png")
        write_png(blank, [[(255, 255, 255)] * 60 for _ in range(60)], [0, 1, 2, 3, 4])
        ok &= not check_png(blank, [])
        bands = os.path.join(d, "bands.png")
        write_png(bands, [[palette[(x // 10 + y // 20) % len(palette)] for x in range(70)] for y in range(60)],
                  [0, 1, 2, 3, 4])
        ok &= check_png(bands, ["4e79a7", "e15759"])
        ok &= not check_png(bands, ["123456"])
    print("selftest", "ok" if ok else "FAILED")
    return ok


def main(argv):
    if len(argv) >= 3 and argv[1] == "png":
        return 0 if check_png(argv[2], argv[3:]) else 1
    if len(argv) == 3 and argv[1] == "console":
        return 0 if check_console(argv[2]) else 1
    if len(argv) == 2 and argv[1] == "selftest":
        return 0 if selftest() else 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
