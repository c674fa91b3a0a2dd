#!/usr/bin/env python3
"""Packs onnxruntime-gpu's wheel into parts small enough to carry to a lent GPU machine, and unpacks them.

usage:
    python3 bench/ort_gpu_pack.py pack WHEEL OUT_DIR [--arch 90] [--part-mib 40] [--first-part-mib N]
    python3 bench/ort_gpu_pack.py unpack PARTS_DIR DEST

Why: the lent GPU machine (the workplace's `device` tool) has no network, and a call carries at most
64 MiB of files. onnxruntime-gpu's wheel is about 255 MB, almost all of it
libonnxruntime_providers_cuda.so, whose `.nv_fatbin` section holds each CUDA kernel's machine code
for six GPU architectures (sm_75 ... sm_120). A GPU runs only its own architecture's code, so `pack`
overwrites the other architectures' code with zeros, which then compress to almost nothing. Nothing
else changes: every header of the fat binaries and every byte outside their payloads stays as it
was, so the file keeps its size and layout, and the driver finds for the kept architecture exactly
the code the wheel had. Code for another architecture that a GPU still tried to use would be zeros,
which fails to load with a CUDA error: never a silently different kernel. PTX (which the driver could
compile for a newer GPU) is kept for every architecture up to --arch.

`pack` writes the wheel's `onnxruntime` package (the Python files and libraries; the pruned CUDA
provider) as one .tar.xz split into parts of at most --part-mib MiB (the first: --first-part-mib,
to fill what a call that carries other things has left), and MANIFEST.json with each part's SHA-256. Carry the parts to the GPU machine, one or more per call (a warm machine keeps files
that earlier calls carried), then run `unpack` there: it checks that every part is present and
intact, naming any that is not, and extracts the package into DEST. Put DEST on PYTHONPATH; the
CUDA libraries it needs (cuBLAS, cuDNN, cuFFT, cuRAND, the CUDA runtime) come from the machine's
own `nvidia-*` Python packages (bench/compare_onnxruntime.py --device cuda preloads them).

Only the standard library is used on the GPU machine (tarfile, lzma, hashlib).
"""
import argparse
import hashlib
import io
import json
import lzma
import os
import struct
import sys
import tarfile
import zipfile

FATBIN_MAGIC = 0xBA55ED50
FATBIN_KIND_PTX = 1
FATBIN_KIND_ELF = 2
CUDA_PROVIDER = "onnxruntime/capi/libonnxruntime_providers_cuda.so"
ARCHIVE = "onnxruntime-gpu.tar.xz"


def elf_section(data, wanted):
    """(file offset, size) of the ELF64 little-endian section named `wanted`, or None."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    def header(index):
        name, _type, _flags, _addr, offset, size = struct.unpack_from("<IIQQQQ", data, shoff + index * shentsize)
        return name, offset, size
    _, names_offset, _ = header(shstrndx)
    for index in range(shnum):
        name, offset, size = header(index)
        end = data.index(b"\0", names_offset + name)
        if data[names_offset + name:end].decode() == wanted:
            return offset, size
    return None


def fatbin_entries(data, offset, size):
    """Yields (entry offset, header size, payload size, kind, arch) for every entry of every fat binary
    in data[offset:offset+size]. Raises ValueError where the section does not parse exactly (an
    onnxruntime built another way): better no package than a damaged one."""
    position, end = offset, offset + size
    while position + 16 <= end:
        magic, _version, header_size, fat_size = struct.unpack_from("<IHHQ", data, position)
        if magic != FATBIN_MAGIC:
            if any(data[position:position + 8]):
                raise ValueError(f"unexpected bytes at {position:#x} in .nv_fatbin")
            position += 8  # padding between fat binaries
            continue
        entry, container_end = position + header_size, position + header_size + fat_size
        if container_end > end:
            raise ValueError(f"fat binary at {position:#x} runs past the end of .nv_fatbin")
        while entry < container_end:
            if entry + 64 > container_end:
                raise ValueError(f"fat binary at {position:#x} does not end where its header says")
            kind, _unknown, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
            arch, = struct.unpack_from("<I", data, entry + 28)
            if kind not in (FATBIN_KIND_PTX, FATBIN_KIND_ELF) or entry_header < 64:
                raise ValueError(f"unknown fat binary entry (kind {kind}) at {entry:#x}")
            yield entry, entry_header, payload, kind, arch
            entry += entry_header + payload
        if entry != container_end:
            raise ValueError(f"fat binary at {position:#x} does not end where its header says")
        position = (container_end + 7) // 8 * 8


def prune_fatbin(library, arch):
    """The CUDA provider with every other architecture's machine code zeroed; prints what it kept."""
    data = bytearray(library)
    section = elf_section(data, ".nv_fatbin")
    if section is None:
        raise ValueError(f"{CUDA_PROVIDER} has no .nv_fatbin section")
    kept = dropped = 0
    archs = {}
    for entry, header, payload, kind, entry_arch in fatbin_entries(data, *section):
        keep = entry_arch == arch if kind == FATBIN_KIND_ELF else entry_arch <= arch
        label = ("sm_" if kind == FATBIN_KIND_ELF else "compute_") + str(entry_arch)
        archs[label] = archs.get(label, 0) + payload
        if keep:
            kept += payload
        else:
            data[entry + header:entry + header + payload] = bytes(payload)
            dropped += payload
    if kept == 0:
        raise ValueError(f"the CUDA provider has no code for sm_{arch}: {sorted(archs)}")
    print(f"  .nv_fatbin: {section[1] / 1e6:.1f} MB; kept sm_{arch}: {kept / 1e6:.1f} MB, zeroed "
          f"{dropped / 1e6:.1f} MB ({', '.join(f'{k} {v / 1e6:.1f} MB' for k, v in sorted(archs.items()))})")
    return bytes(data)


def pack(args):
    os.makedirs(args.out_dir, exist_ok=True)
    archive_path = os.path.join(args.out_dir, ARCHIVE)
    print(f"reading {args.wheel}")
    with zipfile.ZipFile(args.wheel) as wheel:
        names = [n for n in wheel.namelist() if n.startswith("onnxruntime/") and not n.endswith("/")]
        if CUDA_PROVIDER not in names:
            raise SystemExit(f"{args.wheel} has no {CUDA_PROVIDER}: not an onnxruntime-gpu wheel")
        version = next((n.split("/")[0].removesuffix(".dist-info").split("-")[1] for n in wheel.namelist()
                        if n.endswith(".dist-info/METADATA")), "?")
        # preset 6: xz -9 saves under 1 % here and takes three times as long.
        with lzma.open(archive_path, "wb", preset=6) as compressed, tarfile.open(fileobj=compressed, mode="w") as tar:
            for name in sorted(names):
                content = wheel.read(name)
                if name == CUDA_PROVIDER:
                    try:
                        content = prune_fatbin(content, args.arch)
                    except (ValueError, struct.error) as error:
                        raise ValueError(f"{CUDA_PROVIDER} in {args.wheel}: malformed or truncated ({error})")
                info = tarfile.TarInfo(name)
                info.size = len(content)
                info.mode = 0o755 if ".so" in name else 0o644
                tar.addfile(info, io.BytesIO(content))
    parts = []
    with open(archive_path, "rb") as archive:
        while chunk := archive.read((args.first_part_mib if not parts and args.first_part_mib else args.part_mib) << 20):
            parts.append(chunk)
    os.remove(archive_path)
    manifest = {"wheel": os.path.basename(args.wheel), "version": version, "arch": args.arch,
                "sha256": hashlib.sha256(b"".join(parts)).hexdigest(), "parts": []}
    for index, chunk in enumerate(parts, 1):
        name = f"{ARCHIVE}.part{index:02d}of{len(parts):02d}"
        with open(os.path.join(args.out_dir, name), "wb") as out:
            out.write(chunk)
        manifest["parts"].append({"name": name, "bytes": len(chunk), "sha256": hashlib.sha256(chunk).hexdigest()})
    with open(os.path.join(args.out_dir, "MANIFEST.json"), "w") as out:
        json.dump(manifest, out, indent=1)
    total = sum(len(p) for p in parts)
    print(f"wrote {len(parts)} part(s), {total / 2**20:.1f} MiB in all, and MANIFEST.json to {args.out_dir}")


def unpack(args):
    """Checks every part before extracting anything: a missing or damaged part names itself."""
    manifest_path = os.path.join(args.parts_dir, "MANIFEST.json")
    try:
        with open(manifest_path) as source:
            manifest = json.load(source)
    except OSError as error:
        raise SystemExit(f"no onnxruntime-gpu parts: {manifest_path}: {error.strerror}")
    whole = hashlib.sha256()
    problems = []
    for part in manifest["parts"]:
        path = os.path.join(args.parts_dir, part["name"])
        if not os.path.exists(path):
            problems.append(f"{part['name']} is missing")
            continue
        with open(path, "rb") as source:
            content = source.read()
        if hashlib.sha256(content).hexdigest() != part["sha256"]:
            problems.append(f"{part['name']} is damaged (its SHA-256 differs; {len(content)} bytes, expected {part['bytes']})")
        whole.update(content)
    if problems:
        raise SystemExit("onnxruntime-gpu parts incomplete: " + "; ".join(problems))
    if whole.hexdigest() != manifest["sha256"]:
        raise SystemExit("onnxruntime-gpu parts do not join into the packed archive (wrong order or mix of packs)")

    class Joined(io.RawIOBase):
        """The parts read back to back, without a second copy on disk."""
        def __init__(self):
            self.files = [open(os.path.join(args.parts_dir, p["name"]), "rb") for p in manifest["parts"]]
        def readable(self):
            return True
        def readinto(self, buffer):
            while self.files:
                count = self.files[0].readinto(buffer)
                if count:
                    return count
                self.files.pop(0).close()
            return 0

    os.makedirs(args.dest, exist_ok=True)
    with lzma.open(io.BufferedReader(Joined(), 1 << 20)) as decompressed, \
            tarfile.open(fileobj=decompressed, mode="r|") as tar:
        for member in tar:
            if not member.isfile() or member.name.startswith("/") or ".." in member.name.split("/"):
                raise SystemExit(f"unexpected entry in the onnxruntime-gpu archive: {member.name}")
            tar.extract(member, args.dest)
    print(f"onnxruntime-gpu {manifest['version']} (sm_{manifest['arch']} code) in {args.dest}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    pack_parser = commands.add_parser("pack")
    pack_parser.add_argument("wheel")
    pack_parser.add_argument("out_dir")
    pack_parser.add_argument("--arch", type=int, default=90, help="the GPU architecture to keep (90: H100/H200)")
    pack_parser.add_argument("--part-mib", type=int, default=40, help="the largest part, MiB")
    pack_parser.add_argument("--first-part-mib", type=int, help="the first part's size, MiB (default: --part-mib)")
    unpack_parser = commands.add_parser("unpack")
    unpack_parser.add_argument("parts_dir")
    unpack_parser.add_argument("dest")
    args = parser.parse_args()
    if args.command == "pack" and (args.part_mib < 1 or (args.first_part_mib or 1) < 1):
        parser.error("part sizes must be at least 1 MiB")
    # A damaged wheel, a truncated library or a hand-edited manifest ends with one line naming it.
    try:
        pack(args) if args.command == "pack" else unpack(args)
    except ValueError as error:
        raise SystemExit(f"error: {error}")
    except zipfile.BadZipFile as error:
        raise SystemExit(f"error: {args.wheel}: not a wheel ({error})")
    except KeyError as error:
        raise SystemExit(f"error: {args.parts_dir}/MANIFEST.json lacks {error}")
    except (OSError, lzma.LZMAError, tarfile.TarError) as error:
        raise SystemExit(f"error: {error}")


if __name__ == "__main__":
    main()
