"""The DT_SONAME of an ELF shared library, read from its dynamic section: the wheel stores each
library under that name, the one its dependents (libkiln-compiler needs libkiln) ask the loader for."""
from __future__ import annotations

import struct
from typing import Optional

_SHT_DYNAMIC = 6
_DT_NULL, _DT_SONAME = 0, 14


def read_soname(path: str) -> Optional[str]:
    """The library's SONAME, or None when it has none. Raises ValueError for a file that is not a
    64-bit little-endian ELF (the only kind kiln builds: x86-64 Linux)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError(f"{path}: not a 64-bit little-endian ELF file")
    section_offset, = struct.unpack_from("<Q", data, 0x28)
    entry_size, count = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, section_offset + k * entry_size) for k in range(count)]
    for _, kind, _, _, offset, size, link, _, _, _ in sections:
        if kind != _SHT_DYNAMIC:
            continue
        strings_offset = sections[link][4]  # the dynamic section's sh_link names its string table
        for position in range(offset, offset + size, 16):
            tag, value = struct.unpack_from("<qQ", data, position)
            if tag == _DT_NULL:
                break
            if tag == _DT_SONAME:
                end = data.index(b"\0", strings_offset + value)
                return data[strings_offset + value:end].decode()
    return None
