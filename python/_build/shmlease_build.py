"""PEP 517 build backend for the shmlease Python package (standard library only).

Why not setuptools: the package must install on machines that reach no Python
package index. With build isolation, pip installs a backend's requirements from
an index before building; a backend that needs nothing but the standard library
(``requires = []``) lets a plain ``pip install ./python`` work offline, and
``pip install --no-build-isolation ./python`` runs the very same code.

What it builds: one extension module, ``shmlease._shmlease``, compiled from
python/src/*.c and the C library's own sources (shm/*.c, lib/*.c, lib/kind_shm/*.c, lib/kind_etcd/*.c and,
when present, etcd/*.c), linked statically into it: no libshmlease needs to be
installed. The library's sources are found next to this folder (a checkout:
../lib, ../shm) or inside an sdist (csrc/).

Compiler and flags: $CC (else the compiler Python was built with), the
library's own flags, then $CPPFLAGS, $CFLAGS and $LDFLAGS; $SHMLEASE_CFLAGS and
$SHMLEASE_LIBS add flags for this build only. etcd support is decided as the
Makefile decides it: when the sources have etcd/ and pkg-config finds libcurl
and json-c, etcd/*.c is built in with their flags and SHL_HAVE_ETCD=1;
otherwise SHL_HAVE_ETCD=0 and the library refuses etcd:// names (SHL_ENOTSUP).
$SHMLEASE_ETCD=0 leaves it out, =1 requires it (the Makefile's ETCD=).
"""

import base64
import glob
import hashlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
DIST = "shmlease"
PACKAGE_FILES = ("__init__.py", "_aio.py", "_election.py", "_errors.py", "_lease.py", "_records.py", "py.typed", "_shmlease.pyi")
SUMMARY = "Leases with fencing tokens in POSIX shared memory (binding of the C library)"

# The folders of the C library's sources (etcd/, the client, only when built);
# lib/shmlease/ holds the groups of the public header, which lib/shmlease.h includes.
LIB_FOLDERS = ("shm", "lib", "lib/shmlease", "lib/kind_shm", "lib/kind_etcd")


def _csrc():
    """The folder that holds lib/, shm/ (and etcd/): an sdist's csrc/ or the checkout."""
    for root in (os.path.join(HERE, "csrc"), os.path.dirname(HERE)):
        if os.path.isfile(os.path.join(root, "lib", "shmlease.h")):
            return root
    raise RuntimeError("shmlease: the C library's sources (lib/shmlease.h) were not found "
                       "next to python/ nor in python/csrc/")


def _version():
    with open(os.path.join(_csrc(), "lib", "shmlease.h"), encoding="utf-8") as f:
        m = re.search(r'#define\s+SHLEASE_VERSION_STRING\s+"([^"]+)"', f.read())
    if not m:
        raise RuntimeError("shmlease: no SHLEASE_VERSION_STRING in lib/shmlease.h")
    return m.group(1)


ETCD_PKGS = ["libcurl", "json-c"]


def _pkg_config(args):
    try:
        r = subprocess.run(["pkg-config"] + args, capture_output=True, text=True)
    except OSError:
        return None
    return shlex.split(r.stdout) if r.returncode == 0 else None


def _etcd(root):
    """Whether the library's etcd client (etcd/) is built in, as the Makefile
    decides it: when pkg-config finds libcurl and json-c, unless
    $SHMLEASE_ETCD is 0 (1 requires them). None when the sources have no etcd/."""
    if not glob.glob(os.path.join(root, "etcd", "*.c")):
        return None
    want = os.environ.get("SHMLEASE_ETCD", "")
    if want == "0":
        return False
    found = _pkg_config(["--exists"] + ETCD_PKGS) is not None
    if want == "1" and not found:
        raise RuntimeError("shmlease: SHMLEASE_ETCD=1 but pkg-config does not find %s; on Debian:"
                           " apt-get install pkg-config libcurl4-openssl-dev libjson-c-dev"
                           % " and ".join(ETCD_PKGS))
    return found


def _library_sources(root):
    folders = list(LIB_FOLDERS) + (["etcd"] if _etcd(root) else [])
    srcs = []
    for folder in folders:
        srcs += sorted(glob.glob(os.path.join(root, folder, "*.c")))
    return srcs


def _flags(root):
    """(compiler, compile flags, link flags) for the library and the extension."""
    cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    cflags = ["-std=c11", "-O2", "-g", "-Wall", "-Wextra", "-fPIC", "-fvisibility=hidden",
              "-D_GNU_SOURCE", "-I" + os.path.join(root, "lib"),
              "-I" + sysconfig.get_paths()["include"]]
    libs = ["-lpthread"]
    etcd = _etcd(root)
    if etcd is not None:
        cflags.append("-DSHL_HAVE_ETCD=%d" % etcd)
    if etcd:
        cflags += _pkg_config(["--cflags"] + ETCD_PKGS) or []
        # libcurl is loaded at run time (etcd/curl_api.c): not linked.
        libs += (_pkg_config(["--libs", "json-c"]) or []) + ["-ldl"]
    for var in ("CPPFLAGS", "CFLAGS", "SHMLEASE_CFLAGS"):
        cflags += shlex.split(os.environ.get(var, ""))
    ldflags = shlex.split(os.environ.get("LDFLAGS", "")) + shlex.split(
        os.environ.get("SHMLEASE_LIBS", ""))
    return cc, cflags, libs + ldflags


def _compile_extension(outdir):
    """Builds _shmlease<EXT_SUFFIX> in outdir; returns its path."""
    root = _csrc()
    cc, cflags, libs = _flags(root)
    sources = _library_sources(root) + sorted(glob.glob(os.path.join(HERE, "src", "*.c")))
    objdir = tempfile.mkdtemp(prefix="shmlease-build-")
    try:
        def compile_one(i_src):
            i, src = i_src
            obj = os.path.join(objdir, "%03d-%s.o" % (i, os.path.basename(src)[:-2]))
            cmd = cc + cflags + ["-c", src, "-o", obj]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError("shmlease: compiling %s failed:\n%s\n%s" %
                                   (src, " ".join(cmd), r.stderr))
            if r.stderr:
                sys.stderr.write(r.stderr)
            return obj

        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as ex:
            objs = list(ex.map(compile_one, enumerate(sources)))
        target = os.path.join(outdir, "_shmlease" + sysconfig.get_config_var("EXT_SUFFIX"))
        cmd = cc + ["-shared", "-o", target] + objs + libs
        sys.stderr.write("shmlease: %s\n" % " ".join(cmd[:4] + ["<%d objects>" % len(objs)] +
                                                     libs))
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("shmlease: linking failed:\n%s\n%s" % (" ".join(cmd), r.stderr))
        return target
    finally:
        shutil.rmtree(objdir, ignore_errors=True)


def _tag():
    impl = sys.implementation.name
    if impl != "cpython":
        raise RuntimeError("shmlease: the extension is written for CPython")
    py = "cp%d%d" % sys.version_info[:2]
    abi = py + getattr(sys, "abiflags", "")
    plat = re.sub(r"[-.]", "_", sysconfig.get_platform())
    return "%s-%s-%s" % (py, abi, plat)


def _metadata():
    readme = ""
    path = os.path.join(HERE, "README.md")
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            readme = f.read()
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s\n"
            "Requires-Python: >=3.10\nLicense: see the project\n"
            "Classifier: Operating System :: POSIX :: Linux\n"
            "Classifier: Typing :: Typed\n"
            "Description-Content-Type: text/markdown\n\n%s" % (DIST, _version(), SUMMARY, readme))


def _dist_info_files():
    tag = _tag()
    return {
        "METADATA": _metadata(),
        "WHEEL": "Wheel-Version: 1.0\nGenerator: shmlease_build\nRoot-Is-Purelib: false\n"
                 "Tag: %s\n" % tag,
        "top_level.txt": "shmlease\n",
    }


def _record_hash(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode()


# ------------------------------------------------------------------ PEP 517 hooks

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    name = "%s-%s.dist-info" % (DIST, _version())
    d = os.path.join(metadata_directory, name)
    os.makedirs(d, exist_ok=True)
    for fn, text in _dist_info_files().items():
        with open(os.path.join(d, fn), "w", encoding="utf-8") as f:
            f.write(text)
    return name


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version = _version()
    wheel_name = "%s-%s-%s.whl" % (DIST, version, _tag())
    dist_info = "%s-%s.dist-info" % (DIST, version)
    tmp = tempfile.mkdtemp(prefix="shmlease-wheel-")
    try:
        ext = _compile_extension(tmp)
        entries = []
        for fn in PACKAGE_FILES:
            with open(os.path.join(HERE, "shmlease", fn), "rb") as f:
                entries.append(("shmlease/" + fn, f.read(), 0o644))
        with open(ext, "rb") as f:
            entries.append(("shmlease/" + os.path.basename(ext), f.read(), 0o755))
        for fn, text in _dist_info_files().items():
            entries.append((dist_info + "/" + fn, text.encode(), 0o644))
        record = io.StringIO()
        for arc, data, _ in entries:
            record.write("%s,%s,%d\n" % (arc, _record_hash(data), len(data)))
        record.write("%s/RECORD,,\n" % dist_info)
        entries.append((dist_info + "/RECORD", record.getvalue().encode(), 0o644))
        path = os.path.join(wheel_directory, wheel_name)
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
            for arc, data, mode in entries:
                info = zipfile.ZipInfo(arc, date_time=(1980, 1, 1, 0, 0, 0))
                info.external_attr = (0o100000 | mode) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, data)
        return wheel_name
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def build_sdist(sdist_directory, config_settings=None):
    """The package with the C library's sources in csrc/, buildable on its own."""
    version = _version()
    base = "%s-%s" % (DIST, version)
    root = _csrc()
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for rel in ["pyproject.toml", "README.md", "_build/shmlease_build.py"] + \
                ["src/" + os.path.basename(f)
                 for f in sorted(glob.glob(os.path.join(HERE, "src", "*.[ch]")))] + \
                ["shmlease/" + f for f in PACKAGE_FILES]:
            if os.path.exists(os.path.join(HERE, rel)):
                t.add(os.path.join(HERE, rel), arcname=base + "/" + rel)
        if root != os.path.join(HERE, "csrc"):
            for folder in LIB_FOLDERS + ("etcd",):
                for f in sorted(glob.glob(os.path.join(root, folder, "*.[ch]")) +
                                glob.glob(os.path.join(root, folder, "*.map"))):
                    t.add(f, arcname="%s/csrc/%s/%s" % (base, folder, os.path.basename(f)))
        else:
            t.add(root, arcname=base + "/csrc")
        pkg_info = _metadata().encode()
        info = tarfile.TarInfo(base + "/PKG-INFO")
        info.size = len(pkg_info)
        info.mode = 0o644
        t.addfile(info, io.BytesIO(pkg_info))
    return name
