"""The simulated enclave's loader: what hardware does when it launches an enclave.

Run by the simulated backend as ``python -I -B -c <this source> READ_FD WRITE_FD``, it reads
one launch bundle from the host (program, the source of every ``teeboost`` module the program
may import, configuration, the platform file's path), measures exactly those bytes, serves
``teeboost`` imports from them and nowhere else (no file lookups, no bytecode caches), then
hands control to the measured runtime (``teeboost.tee.runtime``). An import of a ``teeboost``
module that is not in the bundle stops the enclave: unmeasured code never runs inside.

It stands for the CPU's launch and measurement logic, so it imports nothing from teeboost and
is the same bytes for every enclave. The host-side ``measure`` used for allow-lists is this
very function, imported normally.
"""

import hashlib
import importlib.abc
import importlib.machinery
import json
import struct
import sys

MEASUREMENT_DOMAIN = b"teeboost-enclave-measurement-v2\x00"
BUNDLE_MAGIC = b"TBL2"
RUNTIME_MODULE = "teeboost.tee.runtime"
PACKAGE = "teeboost"


def _field(data):
    return len(data).to_bytes(8, "big") + data


def measure(program, modules, config):
    """SHA-256 over the program, every (module name, source) pair in name order and the
    configuration. Module sources include package ``__init__`` files and the runtime."""
    digest = hashlib.sha256(MEASUREMENT_DOMAIN)
    digest.update(_field(program))
    for name in sorted(modules):
        digest.update(_field(name.encode()) + _field(modules[name]))
    digest.update(_field(json.dumps(config, sort_keys=True, separators=(",", ":")).encode()))
    return digest.digest()


def encode_bundle(program, modules, config, platform_path):
    """Host side: the launch bundle as bytes (length-prefixed fields, no pickle)."""
    parts = [program, json.dumps(config, sort_keys=True).encode(), platform_path.encode()]
    for name in sorted(modules):
        parts += [name.encode(), modules[name]]
    return BUNDLE_MAGIC + struct.pack(">I", len(parts)) + b"".join(_field(p) for p in parts)


def decode_bundle(data):
    if data[:4] != BUNDLE_MAGIC:
        raise ValueError("not a launch bundle")
    (count,) = struct.unpack(">I", data[4:8])
    parts, position = [], 8
    for _ in range(count):
        size = int.from_bytes(data[position:position + 8], "big")
        position += 8
        if position + size > len(data):
            raise ValueError("truncated launch bundle")
        parts.append(data[position:position + size])
        position += size
    if position != len(data) or count < 3 or (count - 3) % 2:
        raise ValueError("malformed launch bundle")
    modules = {parts[i].decode(): parts[i + 1] for i in range(3, count, 2)}
    return parts[0], modules, json.loads(parts[1]), parts[2].decode()


class MeasuredImporter(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves ``teeboost`` modules from measured bytes only, compiled without bytecode files."""

    def __init__(self, modules):
        self._modules = dict(modules)
        self.loaded = []

    def find_spec(self, fullname, path=None, target=None):
        if fullname != PACKAGE and not fullname.startswith(PACKAGE + "."):
            return None
        if fullname not in self._modules:
            raise ImportError(f"module {fullname!r} is not part of the measured enclave code; refusing to run it",
                              name=fullname)
        source = self._modules[fullname]
        is_package = fullname == PACKAGE or any(m.startswith(fullname + ".") for m in self._modules)
        spec = importlib.machinery.ModuleSpec(fullname, self, is_package=is_package)
        spec.has_location = False
        if is_package:
            spec.submodule_search_locations = []
        spec.loader_state = source
        return spec

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        source = module.__spec__.loader_state
        self.loaded.append(module.__name__)
        exec(compile(source, f"<measured {module.__name__}>", "exec", dont_inherit=True), module.__dict__)


def _read_exact(fd, size):
    # runtime._read_exact's twin on purpose: the loader reads the bundle before any teeboost
    # module exists in the enclave, so it can import nothing of ours
    import os
    chunks = []
    while size:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def main(read_fd, write_fd):
    import os
    sys.dont_write_bytecode = True
    size = int.from_bytes(_read_exact(read_fd, 8), "big")
    program, modules, config, platform_path = decode_bundle(_read_exact(read_fd, size))
    # nothing of teeboost may already be loaded from disk, nor be found there later
    for name in [n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + ".")]:
        del sys.modules[name]
    importer = MeasuredImporter(modules)
    sys.meta_path.insert(0, importer)
    measurement = measure(program, modules, config)
    runtime = __import__(RUNTIME_MODULE, fromlist=["serve"])
    runtime.serve(read_fd, write_fd, program, measurement, config, platform_path)
    os._exit(0)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
