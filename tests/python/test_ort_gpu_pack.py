"""bench/ort_gpu_pack.py, which carries onnxruntime-gpu to a lent GPU machine in parts, on a made-up
wheel: its CUDA provider is a small ELF file whose .nv_fatbin section holds fat binaries with code
for sm_80 and sm_90 and PTX for compute_80 and compute_100.

Checked: pruning for sm_90 zeroes exactly the sm_80 machine code and the compute_100 PTX, and keeps
every header and every other byte; a section that does not parse, or holds no sm_90 code, is
refused; pack + unpack gives back the wheel's files (the provider pruned) across several parts; a
missing or damaged part is named, and nothing is extracted.
Needs only the system python3.

usage: test_ort_gpu_pack.py --source-root DIR [--kiln IGNORED] [--python IGNORED]
"""
import importlib.util
import io
import os
import struct
import sys
import tempfile
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import python_test_env  # noqa: E402

args = python_test_env.cli_arguments()
spec = importlib.util.spec_from_file_location("ort_gpu_pack", os.path.join(args.source_root, "bench", "ort_gpu_pack.py"))
pack_module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pack_module)
failures = []


def check(condition, what):
    print(("ok: " if condition else "FAIL: ") + what)
    if not condition:
        failures.append(what)


def fat_entry(kind, arch, payload):
    """One fat binary entry: a 64-byte header (kind, header size, payload size, arch at byte 28)."""
    header = bytearray(64)
    struct.pack_into("<HHIQ", header, 0, kind, 0x0101, 64, len(payload))
    struct.pack_into("<I", header, 28, arch)
    return bytes(header) + payload


def fat_binary(entries):
    body = b"".join(entries)
    return struct.pack("<IHHQ", pack_module.FATBIN_MAGIC, 1, 16, len(body)) + body


def elf_with_section(name, content):
    """A minimal ELF64 little-endian file: a header, the section's bytes, .shstrtab, three section headers."""
    names = b"\0.shstrtab\0" + name.encode() + b"\0"
    content_offset = 64
    names_offset = content_offset + len(content)
    section_headers = (names_offset + len(names) + 7) // 8 * 8
    header = bytearray(64)
    header[:7] = b"\x7fELF\x02\x01\x01"
    struct.pack_into("<Q", header, 0x28, section_headers)
    struct.pack_into("<HHH", header, 0x3A, 64, 3, 1)
    def section(name_index, offset, size):
        return struct.pack("<IIQQQQIIQQ", name_index, 1, 0, 0, offset, size, 0, 0, 1, 0)
    body = bytes(header) + content + names
    body += bytes(section_headers - len(body))
    return body + bytes(64) + section(1, names_offset, len(names)) + section(11, content_offset, len(content))


payloads = {("sm", 80): b"\x80" * 40, ("sm", 90): b"\x90" * 48, ("compute", 80): b"P" * 24,
            ("compute", 100): b"Q" * 16, ("sm", 90, 2): b"\x99" * 8}
first = fat_binary([fat_entry(2, 80, payloads[("sm", 80)]), fat_entry(2, 90, payloads[("sm", 90)]),
                    fat_entry(1, 80, payloads[("compute", 80)]), fat_entry(1, 100, payloads[("compute", 100)])])
second = fat_binary([fat_entry(2, 90, payloads[("sm", 90, 2)])])
section = first + bytes((8 - len(first) % 8) % 8) + second
library = elf_with_section(".nv_fatbin", section)

# Pruning.
pruned = pack_module.prune_fatbin(library, 90)
check(len(pruned) == len(library), "the pruned provider keeps its size")
changed = [i for i in range(len(library)) if library[i] != pruned[i]]
sm80_start = library.index(payloads[("sm", 80)])
ptx100_start = library.index(payloads[("compute", 100)])
expected = list(range(sm80_start, sm80_start + 40)) + list(range(ptx100_start, ptx100_start + 16))
check(changed == expected, "exactly the sm_80 code and the compute_100 PTX are zeroed")
check(all(pruned[i] == 0 for i in changed), "what is dropped is zeros")
for kept in (payloads[("sm", 90)], payloads[("compute", 80)], payloads[("sm", 90, 2)]):
    check(kept in pruned, f"kept: {kept[:1]!r} x {len(kept)}")


def refused(data, arch, words):
    try:
        pack_module.prune_fatbin(data, arch)
    except ValueError as error:
        return all(word in str(error) for word in words)
    return False


check(refused(library, 75, ["no code for sm_75"]), "a provider without the wanted architecture is refused")
damaged = bytearray(section)
struct.pack_into("<Q", damaged, 8, len(first) - 16 - 8)  # the first fat binary claims 8 bytes too few
check(refused(elf_with_section(".nv_fatbin", bytes(damaged)), 90, ["does not end where"]),
      "a fat binary whose size does not match its entries is refused")
check(refused(elf_with_section(".nv_fatbin", b"\x01" * 64), 90, ["unexpected bytes"]), "a section of garbage is refused")
check(refused(elf_with_section(".text", section), 90, ["no .nv_fatbin"]), "a provider without .nv_fatbin is refused")

# Pack and unpack across parts.
with tempfile.TemporaryDirectory(prefix="kiln_ort_pack_") as work:
    wheel = os.path.join(work, "onnxruntime_gpu-9.9.9-cp312-cp312-manylinux_2_28_x86_64.whl")
    noise = os.urandom(3 << 20)  # incompressible: the archive must span several 1 MiB parts
    files = {pack_module.CUDA_PROVIDER: library, "onnxruntime/__init__.py": b"version = '9.9.9'\n",
             "onnxruntime/capi/libonnxruntime.so.9.9.9": noise}
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
        archive.writestr("onnxruntime_gpu-9.9.9.dist-info/METADATA", "Version: 9.9.9\n")
    parts = os.path.join(work, "parts")
    sys.argv = ["ort_gpu_pack.py", "pack", wheel, parts, "--part-mib", "1", "--first-part-mib", "2"]
    pack_module.main()
    names = sorted(n for n in os.listdir(parts) if ".part" in n)
    sizes = [os.path.getsize(os.path.join(parts, n)) for n in names]
    check(len(names) >= 2 and sizes[0] == 2 << 20 and all(s <= 1 << 20 for s in sizes[1:]),
          f"parts of the asked sizes: {names} {sizes}")

    def unpack(destination):
        sys.argv = ["ort_gpu_pack.py", "unpack", parts, destination]
        try:
            pack_module.main()
            return None
        except SystemExit as stop:
            return str(stop)

    destination = os.path.join(work, "site")
    check(unpack(destination) is None, "unpack succeeds")
    for name, content in files.items():
        with open(os.path.join(destination, name), "rb") as source:
            got = source.read()
        want = pruned if name == pack_module.CUDA_PROVIDER else content
        check(got == want, f"unpacked {name} is the wheel's{' (pruned)' if got is pruned else ''}")

    last = os.path.join(parts, names[-1])
    with open(last, "rb") as source:
        last_content = source.read()
    os.remove(last)
    message = unpack(os.path.join(work, "missing"))
    check(message is not None and names[-1] in message and "missing" in message, f"a missing part is named: {message}")
    check(not os.path.exists(os.path.join(work, "missing")), "nothing is extracted when a part is missing")
    with open(last, "wb") as out:
        out.write(last_content[:-1] + bytes([last_content[-1] ^ 1]))
    message = unpack(os.path.join(work, "damaged"))
    check(message is not None and names[-1] in message and "damaged" in message, f"a damaged part is named: {message}")

# Bad inputs end with one line naming the problem, not a traceback.
import subprocess  # noqa: E402

with tempfile.TemporaryDirectory(prefix="kiln_ort_pack_bad_") as work:
    not_a_wheel = os.path.join(work, "onnxruntime_gpu-1.0-cp312-cp312-manylinux_2_28_x86_64.whl")
    with open(not_a_wheel, "wb") as out:
        out.write(b"not a zip file")
    truncated = os.path.join(work, "truncated.whl")
    with zipfile.ZipFile(truncated, "w") as archive:
        archive.writestr(pack_module.CUDA_PROVIDER, library[:100])  # the section headers are cut off
    manifest_dir = os.path.join(work, "parts")
    os.makedirs(manifest_dir)
    with open(os.path.join(manifest_dir, "MANIFEST.json"), "w") as out:
        out.write("{}")
    script = os.path.join(args.source_root, "bench", "ort_gpu_pack.py")
    for what, command, words in [
            ("not a zip", ["pack", not_a_wheel, os.path.join(work, "a")], "not a wheel"),
            ("truncated provider", ["pack", truncated, os.path.join(work, "b")], "malformed or truncated"),
            ("manifest without parts", ["unpack", manifest_dir, os.path.join(work, "c")], "lacks"),
            ("no manifest", ["unpack", work, os.path.join(work, "d")], "no onnxruntime-gpu parts")]:
        completed = subprocess.run([sys.executable, script] + command, capture_output=True, text=True)
        last = completed.stderr.strip().splitlines()[-1] if completed.stderr.strip() else ""
        check(completed.returncode != 0 and words in last and "Traceback" not in completed.stderr,
              f"{what}: exit {completed.returncode}, '{last}'")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("all checks passed")
