"""What an ELF shared library needs of the platform, read from the file itself (no binutils): its
architecture (the wheel's platform tag follows the library, so a cross build gives an aarch64 wheel
on an x86-64 machine) and the symbol versions it imports from each library (GLIBC_2.17, ...), which
decide whether a manylinux tag is honest."""
from __future__ import annotations

import struct
from typing import Dict, Set

_MACHINES = {62: "x86_64", 183: "aarch64"}  # e_machine: EM_X86_64, EM_AARCH64
_SHT_GNU_VERNEED = 0x6FFFFFFE


def _elf(path: str) -> bytes:
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError(f"{path}: not a 64-bit little-endian ELF file")
    return data


def architecture(path: str) -> str:
    """"x86_64" or "aarch64"; ValueError for another machine."""
    data = _elf(path)
    machine, = struct.unpack_from("<H", data, 18)
    if machine not in _MACHINES:
        raise ValueError(f"{path}: unsupported: ELF machine {machine} (kiln wheels are for x86_64 and aarch64)")
    return _MACHINES[machine]


def required_versions(path: str) -> Dict[str, Set[str]]:
    """{needed library: the version names imported from it}, from the .gnu.version_r section."""
    data = _elf(path)
    section_offset, = struct.unpack_from("<Q", data, 0x28)
    entry_size, count = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, section_offset + k * entry_size) for k in range(count)]
    needed: Dict[str, Set[str]] = {}

    def text(strings: int, at: int) -> str:
        return data[strings + at:data.index(b"\0", strings + at)].decode()

    for _, kind, _, _, offset, _, link, entries, _, _ in sections:
        if kind != _SHT_GNU_VERNEED:
            continue
        strings = sections[link][4]
        position = offset
        for _ in range(entries):  # sh_info: the number of Verneed entries
            _, aux_count, file_name, aux, following = struct.unpack_from("<HHIII", data, position)
            versions = needed.setdefault(text(strings, file_name), set())
            aux_position = position + aux
            for _ in range(aux_count):
                _, _, _, name, aux_next = struct.unpack_from("<IHHII", data, aux_position)
                versions.add(text(strings, name))
                aux_position += aux_next
            position += following
    return needed


def newest_glibc(path: str) -> tuple:
    """The newest GLIBC_x.y the library imports, as (x, y); (0, 0) when it imports none."""
    newest = (0, 0)
    for versions in required_versions(path).values():
        for version in versions:
            if version.startswith("GLIBC_") and version[6:].replace(".", "").isdigit():
                parts = tuple(int(p) for p in version[6:].split("."))[:2]
                newest = max(newest, parts + (0,) * (2 - len(parts)))
    return newest
