"""
What ships (docs/deploying.md): tools/packaging, built into BUILD/package with
CLRSCOPE_PACKAGE=ON.

- The shipped libclrscope.so needs nothing but glibc's libraries and the loader (ldd and its
  NEEDED entries), exports DllGetClassObject and clrscope_serve alone, imports no
  __tls_get_addr, keeps none of the civetweb functions clrscope stays away from (docs/security.md), loads on each runtime the test
  apps are built for, and states the glibc it needs as `objdump -T` reads it, in
  /api/v1/status and in `clrscope --version`.
- In a root filesystem holding only glibc, libstdc++/libgcc_s and the .NET runtime (no civetweb,
  cJSON or zlib), an app under the shipped library and launcher serves the dashboard, a CPU
  profile and a heap snapshot. The development library, which needs Debian's shared civetweb,
  cJSON and zlib, gets the launcher's reason there instead, and the app does not start.
- The dotnet tool installed from the fresh .nupkg into an empty tool path profiles an app: the
  app keeps the tool's pid and its exit status.
- An app referencing Clrscope.Native, published, runs under the library in its own output with
  only the runtime's variables set, and its dashboard answers.
- Where tools/test.sh packed the linux-arm64 build beside (build-arm64/package/linux-arm64),
  both packages carry it, it needs glibc alone, and an app published for linux-arm64 with
  Clrscope.Native runs under it in qemu-user with the runtime's variables alone.
- Published for linux-musl-x64 it carries the musl stub instead, which a musl program loads as
  the runtime would: one line saying clrscope needs glibc, and a refusal.
- The launcher refuses, in one line, an app whose runtimeconfig.json asks for .NET 6 or 7, and
  runs it without the profiler's variables (no package needed).
"""
import glob
import os
import re
import shutil
import stat
import subprocess
import tempfile
import time
import unittest
import zipfile

from harness import (BUILD, CLSID, LAUNCHER, LIB, ProfiledApp, app_command, available_runtimes,
                     run_launcher_on, runtimeconfig)
from pprofdec import read_pprof

PKG = os.path.join(BUILD, "package")
SHIPPED_LIB = os.path.join(PKG, "linux-x64", "libclrscope.so")
SHIPPED_LAUNCHER = os.path.join(PKG, "linux-x64", "clrscope")
MUSL_STUB = os.path.join(PKG, "linux-musl-x64", "libclrscope.so")
# the linux-arm64 cross build's shipped library, which tools/test.sh packs beside linux-x64's
ARM64_SHIPPED = os.path.join(os.environ.get("CLRSCOPE_ARM64_BUILD") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "build-arm64"), "package",
    "linux-arm64", "libclrscope.so")
NUPKGS = os.path.join(PKG, "nupkg")
# what the shipped library may need: glibc's libraries and the loader
GLIBC = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "ld-linux-x86-64.so.2",
         "linux-vdso.so.1"}
GLIBC_ARM64 = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "ld-linux-aarch64.so.1"}
# what the .NET runtime needs besides (its own libraries' ldd)
RUNTIME_EXTRA = {"librt.so.1", "libstdc++.so.6", "libgcc_s.so.1"}
# civetweb functions clrscope must not reach (tests/hardening/test_civetweb.py)
FORBIDDEN = ("mg_handle_form_request", "mg_upload", "mg_send_file", "mg_send_mime_file",
             "mg_set_websocket_handler", "mg_set_auth_handler", "mg_modify_passwords_file")
DOTNET_ENV = {"DOTNET_CLI_TELEMETRY_OPTOUT": "1", "DOTNET_NOLOGO": "1",
              "DOTNET_SKIP_FIRST_TIME_EXPERIENCE": "1", "DOTNET_GENERATE_ASPNET_CERTIFICATE": "0",
              "DOTNET_CLI_WORKLOAD_UPDATE_NOTIFY_DISABLE": "1"}


def need_package(test):
    if not os.path.exists(SHIPPED_LIB) or not glob.glob(os.path.join(NUPKGS, "*.nupkg")):
        test.skipTest(f"no packages in {PKG}: configure with -DCLRSCOPE_PACKAGE=ON")


def need_arm64(test):
    """Skips a test of the linux-arm64 build unless the packages were packed with it (a stale
    build-arm64 beside packages packed without it is not enough), or fails it where tools/test.sh
    promised it (CLRSCOPE_TEST_ARM64=1)."""
    if os.environ.get("CLRSCOPE_TEST_ARM64") == "0":
        test.skipTest("CLRSCOPE_TEST_ARM64=0: linux-arm64 left out")
    native = glob.glob(os.path.join(NUPKGS, "Clrscope.Native.*.nupkg"))
    packed = False
    if native and os.path.exists(ARM64_SHIPPED):
        with zipfile.ZipFile(native[0]) as z:
            packed = "runtimes/linux-arm64/native/libclrscope.so" in z.namelist()
    if not packed:
        why = f"the packages carry no linux-arm64 build ({ARM64_SHIPPED}: tools/test.sh packs it)"
        if os.environ.get("CLRSCOPE_TEST_ARM64") == "1":
            test.fail(why)
        test.skipTest(why)


def glibc_min(lib):
    """The highest GLIBC_x.y among lib's imports, as objdump -T lists them."""
    out = subprocess.run(["objdump", "-T", lib], capture_output=True, text=True,
                         check=True).stdout
    versions = {tuple(int(x) for x in v.split(".")) for v in re.findall(r"GLIBC_([0-9.]+)\)?",
                                                                      out)}
    assert versions, out[:500]
    return ".".join(map(str, max(versions)))


def ldd(path, env=None):
    """{name: resolved path or 'not found'} of ldd's lines."""
    out = subprocess.run(["ldd", path], capture_output=True, text=True, env=env).stdout
    deps = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\S+)(?: => (\S+(?: \S+)?))?", line)
        if m:
            deps[os.path.basename(m.group(1))] = (m.group(2) or m.group(1)).split(" (")[0]
    return deps


def tool_env(tmp, extra=None):
    """dotnet's environment for a test: its own package folder, so that the freshly packed
    packages are the ones restored (a package of the same version may sit in the machine's)."""
    env = dict(os.environ, **DOTNET_ENV)
    env["NUGET_PACKAGES"] = os.path.join(tmp, "nuget-packages")
    env["DOTNET_CLI_HOME"] = tmp
    env.update(extra or {})
    return env


class Library(unittest.TestCase):
    def setUp(self):
        need_package(self)

    def test_needs_only_glibc(self):
        deps = ldd(SHIPPED_LIB)
        self.assertIn("libc.so.6", deps)
        self.assertEqual(sorted(n for n in deps if n not in GLIBC), [],
                         f"the shipped library needs more than glibc: {deps}")
        self.assertNotIn("not found", " ".join(deps.values()))
        dyn = subprocess.run(["readelf", "-d", SHIPPED_LIB], capture_output=True, text=True,
                             check=True).stdout
        needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dyn))
        self.assertTrue(needed and needed <= GLIBC, needed)
        self.assertIn("BIND_NOW", dyn)

    def test_exports_and_symbols(self):
        defined = subprocess.run(["nm", "-D", "--defined-only", SHIPPED_LIB], capture_output=True,
                                 text=True, check=True).stdout.split()
        self.assertEqual([s for s in defined if not re.fullmatch(r"[0-9a-f]+|[A-Za-z]", s)],
                         ["DllGetClassObject", "clrscope_serve"])
        undefined = subprocess.run(["nm", "-D", "--undefined-only", SHIPPED_LIB],
                                   capture_output=True, text=True, check=True).stdout
        self.assertNotIn("__tls_get_addr", undefined)
        self.assertNotRegex(undefined, r"\b(mg_|cJSON_|inflate|deflate)")
        local = subprocess.run(["nm", SHIPPED_LIB], capture_output=True, text=True,
                               check=True).stdout
        self.assertIn("mg_start", local)  # civetweb is in it (so the next check means something)
        self.assertIn("cJSON_Parse", local)
        self.assertEqual([f for f in FORBIDDEN if re.search(rf"\b{f}\b", local)], [])

    def test_loads_on_each_runtime(self):
        """The shipped launcher and library on every runtime the test apps are built for (.NET
        8 and 9 self-contained, 10 on the machine's runtime)."""
        runtimes = available_runtimes()
        self.assertIn("net10", runtimes)
        for rt in runtimes:
            r = subprocess.run([SHIPPED_LAUNCHER, "run", "--port", "0", "--"] + app_command(rt)
                               + ["version"], capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, f"{rt}: {r.stderr}")
            self.assertRegex(r.stdout, rf"^{rt[3:]}\.", rt)
            self.assertIn("clrscope: dashboard http://127.0.0.1:", r.stderr, rt)

    def test_version_states_glibc(self):
        r = subprocess.run([SHIPPED_LAUNCHER, "--version"], capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^clrscope \d+\.\d+\.\d+ \(commit ([0-9a-f]{12}(-dirty)?|unknown)\)")
        self.assertIn(f"needs glibc {glibc_min(SHIPPED_LIB)} or newer", r.stdout)
        self.assertIn(SHIPPED_LIB, r.stdout)


def chroot_prefix():
    """The command that runs the rest in a private mount namespace (as root; else in a user
    namespace of its own, where one can be made), or None."""
    unshare = shutil.which("unshare")
    if not unshare:
        return None
    if os.geteuid() == 0:
        return [unshare, "-m", "--"]
    if subprocess.run([unshare, "-Urmpf", "true"], capture_output=True).returncode == 0:
        return [unshare, "-Urmpf", "--"]
    return None


class RootFilesystem(unittest.TestCase):
    """A root filesystem holding glibc's runtime files, libstdc++/libgcc_s and the .NET runtime,
    copied or bound from this machine, the test app and the shipped files: nothing else."""

    @classmethod
    def setUpClass(cls):
        cls.root = None
        if not os.path.exists(SHIPPED_LIB):
            return
        cls.prefix = chroot_prefix()
        if cls.prefix is None:
            return
        dotnet = os.path.realpath(shutil.which("dotnet"))
        cls.dotnet_root = os.path.dirname(dotnet)
        app_dir = os.path.dirname(app_command("net10")[-1])
        cls.root = root = tempfile.mkdtemp(prefix="clrscope-rootfs-")
        os.chmod(root, 0o755)
        cls.runtime_files = set()
        runtime = sorted(glob.glob(os.path.join(cls.dotnet_root, "shared", "Microsoft.NETCore.App",
                                                "*", "*.so")))
        for f in [dotnet] + runtime + glob.glob(os.path.join(cls.dotnet_root, "host", "fxr",
                                                             "*", "*.so")):
            if os.path.basename(f) in ("libcoreclrtraceptprovider.so", "libmscordbi.so",
                                       "libmscordaccore.so"):
                continue  # optional: lttng tracing and the debugger's, loaded on demand
            for name, path in ldd(f).items():
                if name == "linux-vdso.so.1":
                    continue
                cls.runtime_files.add(name)
                dest = os.path.join(root, "lib", "x86_64-linux-gnu", name)
                if not os.path.exists(dest):
                    os.makedirs(os.path.dirname(dest), exist_ok=True)
                    shutil.copy(os.path.realpath(path), dest)
        os.makedirs(os.path.join(root, "lib64"))
        os.symlink("../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
                   os.path.join(root, "lib64", "ld-linux-x86-64.so.2"))
        for d in ("proc", "dev", "tmp", "app", "clrscope", "devlib", "usr/share/dotnet/host",
                  "usr/share/dotnet/shared"):
            os.makedirs(os.path.join(root, d), exist_ok=True)
        os.chmod(os.path.join(root, "tmp"), 0o1777)
        shutil.copy(dotnet, os.path.join(root, "usr/share/dotnet/dotnet"))
        for f in (SHIPPED_LIB, SHIPPED_LAUNCHER):
            shutil.copy(f, os.path.join(root, "clrscope"))
        shutil.copy(LIB, os.path.join(root, "devlib"))
        # bound, not copied, inside the namespace: the runtime (80 MB) and the app
        cls.binds = [(os.path.join(cls.dotnet_root, "host"), "usr/share/dotnet/host"),
                     (os.path.join(cls.dotnet_root, "shared"), "usr/share/dotnet/shared"),
                     (app_dir, "app"), ("/dev", "dev")]

    @classmethod
    def tearDownClass(cls):
        if cls.root:
            shutil.rmtree(cls.root, ignore_errors=True)

    def setUp(self):
        need_package(self)
        if self.prefix is None:
            self.skipTest("chroot needs root or a user namespace, and neither is available here")

    def wrap(self):
        """The command that enters the root filesystem; the command inside follows it."""
        mount, chroot = shutil.which("mount"), shutil.which("chroot", path="/usr/sbin:/sbin:"
                                                                     + os.environ["PATH"])
        mounts = "; ".join(f'{mount} --rbind "{src}" "$R/{dst}"' for src, dst in self.binds)
        script = (f'set -e; R="{self.root}"; {mount} --make-rprivate /; {mounts}; '
                  f'{mount} -t proc proc "$R/proc"; exec {chroot} "$R" "$@"')
        return self.prefix + [shutil.which("sh"), "-c", script, "sh"]

    def env(self, extra=None):
        env = {"PATH": "/usr/share/dotnet:/usr/bin:/bin", "HOME": "/tmp",
               "DOTNET_ROOT": "/usr/share/dotnet", "DOTNET_SYSTEM_GLOBALIZATION_INVARIANT": "1",
               "CLRSCOPE_TRUTH": "/tmp/truth.json", "TMPDIR": "/tmp", "XDG_RUNTIME_DIR": ""}
        env.update(extra or {})
        return env

    def test_nothing_but_glibc_and_the_runtime(self):
        self.assertEqual(sorted(self.runtime_files - GLIBC - RUNTIME_EXTRA), [],
                         "the .NET runtime needs more than the test meant to give it")
        libs = os.listdir(os.path.join(self.root, "lib", "x86_64-linux-gnu"))
        self.assertEqual([n for n in libs if re.match(r"lib(z|civetweb|cjson)\.", n)], [])

    def test_profiles_in_the_bare_root(self):
        cmd = self.wrap() + ["/clrscope/clrscope", "run", "--port", "0", "--",
                             "/usr/share/dotnet/dotnet", "/app/TestApp.dll"]
        app = ProfiledApp("cpu-split", ["--seconds", "60"], command=cmd, profile=False,
                          port=None, env=self.env())
        with app:
            app.wait_ready(timeout=90)
            status = app.json("/api/v1/status")
            self.assertEqual(status["build"]["glibc_min"], glibc_min(SHIPPED_LIB))
            self.assertIn("/app/TestApp.dll", status["process"]["cmdline"])
            code, _, body = app.request("/")
            self.assertEqual(code, 200)
            self.assertIn(b"<html", body[:2000].lower())
            time.sleep(2)
            prof = read_pprof(app.pprof("/debug/pprof/profile?seconds=2&wait=0"))
            self.assertGreater(prof.totals().get("cpu", 0), 0, prof.sample_types)
            snap = app.json("/api/v1/gcdump", method="POST", data=b"", expect=202)
            done = app.wait_json(f"/api/v1/gcdump/{snap['id']}?limit=5",
                                 lambda s: s["status"] != "running", timeout=120)
            self.assertEqual(done["status"], "done", done.get("error"))
            self.assertGreater(done["objects"], 1000)
            code, _, body = app.request(f"/api/v1/gcdump/{snap['id']}/file")
            self.assertEqual(code, 200)
            self.assertGreater(len(body), 10000)
        self.assertFalse([l for l in app.stderr_lines if "cannot load" in l], app.stderr_lines)

    def test_launcher_names_what_is_missing(self):
        """The development library needs Debian's shared civetweb, cJSON and zlib, which are not
        in this root: the launcher says which one the loader missed, and starts nothing."""
        r = subprocess.run(self.wrap() + ["/clrscope/clrscope", "run", "--",
                                          "/usr/share/dotnet/dotnet", "/app/TestApp.dll", "hello"],
                           capture_output=True, text=True, timeout=120,
                           env=self.env({"CLRSCOPE_LIB": "/devlib/libclrscope.so"}))
        self.assertEqual(r.returncode, 127, r.stderr)
        self.assertEqual(r.stdout, "")
        self.assertRegex(r.stderr, r"clrscope: the profiler library cannot load here, so the app "
                         r"would run unprofiled: .*lib(civetweb|cjson|z)\.so\.1: cannot open "
                         r"shared object file")
        self.assertRegex(r.stderr, r"needs x86-64 Linux with glibc [0-9.]+ or newer")


class Tool(unittest.TestCase):
    """`dotnet tool install` from the freshly packed .nupkg, then the tool as a user runs it."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = None
        if not glob.glob(os.path.join(NUPKGS, "clrscope.*.nupkg")):
            return
        cls.tmp = tempfile.mkdtemp(prefix="clrscope-tool-")
        cls.tools = os.path.join(cls.tmp, "tools")
        config = os.path.join(cls.tmp, "nuget.config")
        with open(config, "w") as f:
            f.write('<?xml version="1.0" encoding="utf-8"?>\n<configuration><packageSources>'
                    f'<clear /><add key="local" value="{NUPKGS}" /></packageSources>'
                    '</configuration>\n')
        t0 = time.monotonic()
        cls.install = subprocess.run(
            ["dotnet", "tool", "install", "clrscope", "--tool-path", cls.tools, "--configfile",
             config], capture_output=True, text=True, timeout=300, env=tool_env(cls.tmp))
        cls.install_s = time.monotonic() - t0
        cls.tool = os.path.join(cls.tools, "clrscope")

    @classmethod
    def tearDownClass(cls):
        if cls.tmp:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        need_package(self)
        self.assertEqual(self.install.returncode, 0, self.install.stdout + self.install.stderr)

    def test_profiles_an_app(self):
        app = ProfiledApp("cpu-split", ["--seconds", "60"], profile=False,
                          command=[self.tool, "run", "--port", "0", "--"] + app_command("net10"))
        with app:
            app.wait_ready(timeout=90)
            # the launcher took the tool's place, and the app the launcher's: one process
            self.assertEqual(app.pid, app.proc.pid)
            status = app.json("/api/v1/status")
            self.assertEqual(status["build"]["glibc_min"], glibc_min(SHIPPED_LIB))
            self.assertEqual(status["build"]["version"], status["clrscope_version"])
            ls = subprocess.run([self.tool, "ls"], capture_output=True, text=True, timeout=60)
            self.assertIn(f"{app.pid} ", ls.stdout)
            time.sleep(1.5)
            prof = read_pprof(app.pprof("/debug/pprof/profile?seconds=1&wait=0"))
            self.assertGreater(prof.totals().get("cpu", 0), 0)

    def test_exit_status_and_output_kept(self):
        r = subprocess.run([self.tool, "run", "--port", "0", "--"] + app_command("net10")
                           + ["hello", "--exit", "7"], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 7, r.stderr)
        self.assertIn("clrscope: dashboard http://127.0.0.1:", r.stderr)
        plain = subprocess.run(app_command("net10") + ["hello"], capture_output=True, text=True,
                               timeout=120)
        self.assertEqual(r.stdout, plain.stdout)

    def test_another_user_runs_it(self):
        """A package keeps no file modes: the tool's files are the installer's alone to execute.
        Another user gets the launcher through the loader, and the app is profiled all the
        same."""
        if os.geteuid() != 0 or not shutil.which("setpriv"):
            self.skipTest("running as another user needs root and setpriv")
        for d in (self.tmp, self.tools):
            os.chmod(d, 0o755)
        launcher = glob.glob(os.path.join(self.tools, ".store", "**", "native", "linux-x64",
                                          "clrscope"), recursive=True)
        self.assertEqual(len(launcher), 1, launcher)
        self.assertFalse(os.stat(launcher[0]).st_mode & (stat.S_IXGRP | stat.S_IXOTH),
                         "the package's launcher is executable by others: nothing to test")
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        r = subprocess.run(nobody + [self.tool, "run", "--port", "0", "--"] + app_command("net10")
                           + ["hello", "--exit", "3"], capture_output=True, text=True,
                           timeout=120, env=dict(os.environ, HOME="/tmp"))
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("clrscope: dashboard http://127.0.0.1:", r.stderr)

    def test_tool_itself_is_left_alone(self):
        """In an image whose environment profiles every .NET process, the runtime loads clrscope
        into the tool as well: there it takes no port and says nothing, and `ls` does not list
        the tool (its pid is the launcher's after the exec)."""
        env = dict(os.environ, CORECLR_ENABLE_PROFILING="1", CORECLR_PROFILER=CLSID,
                   CORECLR_PROFILER_PATH=SHIPPED_LIB, CLRSCOPE_PORT="0")
        r = subprocess.run([self.tool, "ls"], capture_output=True, text=True, timeout=60, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")
        self.assertNotIn(self.tool, r.stdout)
        r = subprocess.run(["dotnet", glob.glob(os.path.join(self.tools, ".store", "**",
                                                            "clrscope.dll"), recursive=True)[0],
                            "--version"], capture_output=True, text=True, timeout=60, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")

    def test_version_is_the_launchers(self):
        r = subprocess.run([self.tool, "--version"], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        shipped = subprocess.run([SHIPPED_LAUNCHER, "--version"], capture_output=True, text=True)
        self.assertEqual(r.stdout.splitlines()[0], shipped.stdout.splitlines()[0])
        self.assertIn(f"needs glibc {glibc_min(SHIPPED_LIB)} or newer", r.stdout)


APP_CSPROJ = """<Project Sdk="Microsoft.NET.Sdk">
  <PropertyGroup>
    <OutputType>Exe</OutputType>
    <TargetFramework>net{major}.0</TargetFramework>
    <InvariantGlobalization>true</InvariantGlobalization>
  </PropertyGroup>
  <ItemGroup>
    <PackageReference Include="Clrscope.Native" Version="{version}" />
  </ItemGroup>
</Project>
"""
# dlopen and DllGetClassObject, as the runtime calls them (built with musl-gcc)
MUSL_LOADER = r"""#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv)
{
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) {
        printf("dlopen: %s\n", dlerror());
        return 2;
    }
    int (*get)(const void *, const void *, void **) =
        (int (*)(const void *, const void *, void **))dlsym(h, "DllGetClassObject");
    if (!get)
        return 3;
    void *out = &out;
    int hr = get(0, 0, &out);
    printf("hr=0x%08x out=%s\n", (unsigned)hr, out ? "set" : "null");
    return 0;
}
"""
APP_MAIN = """System.Console.WriteLine($"ready pid={System.Environment.ProcessId}");
System.Console.In.ReadToEnd();
"""


class NativePackage(unittest.TestCase):
    """An app that references Clrscope.Native, published, then run with the runtime's three
    variables alone (what docs/deploying.md's Dockerfile sets)."""

    def setUp(self):
        need_package(self)
        self.tmp = tempfile.mkdtemp(prefix="clrscope-nativepkg-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def publish(self, *args):
        """Publishes an app that references the fresh Clrscope.Native into self.tmp/out with
        `args`; returns (output directory, dotnet's stdout)."""
        nupkg = glob.glob(os.path.join(NUPKGS, "Clrscope.Native.*.nupkg"))
        self.assertEqual(len(nupkg), 1, nupkg)
        version = re.search(r"Clrscope\.Native\.(.+)\.nupkg$", nupkg[0]).group(1)
        self.major = major = subprocess.run(["dotnet", "--version"], capture_output=True,
                                            text=True, check=True).stdout.split(".")[0]
        proj = os.path.join(self.tmp, "app")
        os.makedirs(proj)
        with open(os.path.join(proj, "app.csproj"), "w") as f:
            f.write(APP_CSPROJ.format(major=major, version=version))
        with open(os.path.join(proj, "Program.cs"), "w") as f:
            f.write(APP_MAIN)
        # the local folder beside the machine's own feeds
        with open(os.path.join(proj, "nuget.config"), "w") as f:
            f.write('<?xml version="1.0" encoding="utf-8"?>\n<configuration><packageSources>'
                    f'<add key="clrscope" value="{NUPKGS}" /></packageSources></configuration>\n')
        out = os.path.join(self.tmp, "out")
        r = subprocess.run(["dotnet", "publish", proj, "-c", "Release", "-o", out,
                            "--disable-build-servers", "-nologo", *args], capture_output=True,
                           text=True, timeout=600, env=tool_env(self.tmp))
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-2000:])
        return out, r.stdout

    def test_published_app_is_profiled(self):
        out, stdout = self.publish()
        self.assertNotIn("CLRSCOPE001", stdout)  # built for any runtime: no warning
        lib = os.path.join(out, "runtimes", "linux-x64", "native", "libclrscope.so")
        self.assertTrue(os.path.exists(lib), sorted(os.listdir(out)))
        with open(lib, "rb") as a, open(SHIPPED_LIB, "rb") as b:
            self.assertEqual(a.read(), b.read(), "the package carries another library")
        env = {"CORECLR_ENABLE_PROFILING": "1", "CORECLR_PROFILER": CLSID,
               "CORECLR_PROFILER_PATH": lib, "CLRSCOPE_PORT": "0"}
        app = ProfiledApp("unused", command=["dotnet", os.path.join(out, "app.dll")],
                          profile=False, port=None, env=env)
        with app:
            app.wait_ready(timeout=90)
            status = app.json("/api/v1/status")
            self.assertIn("app.dll", status["process"]["cmdline"])
            self.assertEqual(status["build"]["glibc_min"], glibc_min(SHIPPED_LIB))
            self.assertEqual(app.request("/")[0], 200)

    def test_app_published_for_musl_carries_the_stub(self):
        # framework-dependent, without the apphost: no runtime pack to fetch
        out, stdout = self.publish("-r", "linux-musl-x64", "--self-contained", "false",
                                   "-p:UseAppHost=false")
        self.assertIn("CLRSCOPE001", stdout)
        self.assertIn("says so when the app starts", stdout)
        with open(os.path.join(out, "libclrscope.so"), "rb") as a, open(MUSL_STUB, "rb") as b:
            self.assertEqual(a.read(), b.read(), "not the musl stub")


    def test_app_published_for_arm64_is_profiled_under_qemu(self):
        need_arm64(self)
        qemu = shutil.which("qemu-aarch64-static")
        if not qemu:
            self.skipTest("no qemu-aarch64-static (tools/deps.sh arm64 installs it)")
        # the runtime packs the machine already has (the test app's arm64 publish restored
        # them): linked into this test's own package folder instead of fetched again
        home = os.path.join(os.path.expanduser("~"), ".nuget", "packages")
        mine = os.path.join(self.tmp, "nuget-packages")
        os.makedirs(mine, exist_ok=True)
        for pack in ("microsoft.netcore.app.runtime.linux-arm64",
                     "microsoft.netcore.app.host.linux-arm64"):
            if os.path.isdir(os.path.join(home, pack)):
                os.symlink(os.path.join(home, pack), os.path.join(mine, pack))
        out, stdout = self.publish("-r", "linux-arm64", "--self-contained", "true")
        self.assertNotIn("CLRSCOPE001", stdout)  # the package runs there: no warning
        lib = os.path.join(out, "libclrscope.so")
        with open(lib, "rb") as a, open(ARM64_SHIPPED, "rb") as b:
            self.assertEqual(a.read(), b.read(), "not the linux-arm64 build")
        env = {"CORECLR_ENABLE_PROFILING": "1", "CORECLR_PROFILER": CLSID,
               "CORECLR_PROFILER_PATH": lib, "CLRSCOPE_PORT": "0", "LD_PRELOAD": ""}
        app = ProfiledApp("unused", command=[qemu, os.path.join(out, "app")], profile=False,
                          port=None, env=env)
        with app:
            app.wait_ready(timeout=120)
            status = app.json("/api/v1/status")
            self.assertEqual(status["runtime"]["major"], int(self.major))
            self.assertEqual(app.request("/")[0], 200)


class Arm64Files(unittest.TestCase):
    """The linux-arm64 build the packages carry: glibc's libraries alone, bound at load, and in
    both packages."""

    def setUp(self):
        need_package(self)
        need_arm64(self)

    def test_needs_only_glibc(self):
        for path in (ARM64_SHIPPED, os.path.join(os.path.dirname(ARM64_SHIPPED), "clrscope")):
            with open(path, "rb") as f:
                self.assertEqual(int.from_bytes(f.read(20)[18:20], "little"), 183, path)
            dyn = subprocess.run(["readelf", "-d", path], capture_output=True, text=True,
                                 check=True).stdout
            needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dyn))
            self.assertTrue(needed and needed <= GLIBC_ARM64, (path, needed))
            if path == ARM64_SHIPPED:  # (as linux-x64's: the library binds at load)
                self.assertIn("BIND_NOW", dyn)

    def test_both_packages_carry_it(self):
        with open(ARM64_SHIPPED, "rb") as f:
            lib = f.read()
        native = glob.glob(os.path.join(NUPKGS, "Clrscope.Native.*.nupkg"))[0]
        with zipfile.ZipFile(native) as z:
            self.assertEqual(z.read("runtimes/linux-arm64/native/libclrscope.so"), lib)
        tool = glob.glob(os.path.join(NUPKGS, "clrscope.*.nupkg"))[0]
        with zipfile.ZipFile(tool) as z:
            names = {n.split("/native/", 1)[-1]: n for n in z.namelist() if "/native/" in n}
            self.assertIn("linux-arm64/clrscope", names)
            self.assertEqual(z.read(names["linux-arm64/libclrscope.so"]), lib)


class MuslStub(unittest.TestCase):
    """The glibc library cannot load in a musl process, and the runtime does not say so: the
    stub Clrscope.Native carries for linux-musl-x64 says why, in one line, and refuses. Loaded
    here by a musl program (Debian's musl-tools) as the runtime would: dlopen, then
    DllGetClassObject."""

    def setUp(self):
        need_package(self)
        if not shutil.which("musl-gcc"):
            self.skipTest("no musl-gcc (tools/deps.sh test installs musl-tools)")
        self.tmp = tempfile.mkdtemp(prefix="clrscope-musl-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.loader = os.path.join(self.tmp, "load")
        with open(self.loader + ".c", "w") as f:
            f.write(MUSL_LOADER)
        subprocess.run(["musl-gcc", "-O2", "-o", self.loader, self.loader + ".c"], check=True)

    def test_stub_says_why_and_refuses(self):
        r = subprocess.run([self.loader, MUSL_STUB], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout.strip(), "hr=0x80040111 out=null")  # CLASS_E_CLASSNOTAVAILABLE
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertRegex(lines[0], r"^clrscope: warning: .*musl.*needs glibc.*unprofiled")

    def test_the_glibc_library_cannot_load_there(self):
        r = subprocess.run([self.loader, SHIPPED_LIB], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("dlopen:", r.stdout)

    def test_stub_needs_musl_alone(self):
        out = subprocess.run(["readelf", "-d", MUSL_STUB], capture_output=True, text=True,
                             check=True).stdout
        self.assertEqual(re.findall(r"\(NEEDED\).*\[(.+)\]", out), ["libc.so"])
        exports = subprocess.run(["nm", "-D", "--defined-only", MUSL_STUB], capture_output=True,
                                 text=True, check=True).stdout.split()
        self.assertIn("DllGetClassObject", exports)

    def test_the_package_carries_it(self):
        nupkg = glob.glob(os.path.join(NUPKGS, "Clrscope.Native.*.nupkg"))[0]
        with zipfile.ZipFile(nupkg) as z:
            names = z.namelist()
            self.assertIn("runtimes/linux-musl-x64/native/libclrscope.so", names)
            with open(MUSL_STUB, "rb") as f:
                self.assertEqual(z.read("runtimes/linux-musl-x64/native/libclrscope.so"),
                                 f.read())


class RuntimeRefusal(unittest.TestCase):
    """`clrscope run` reads the app's runtimeconfig.json: .NET 6 or 7 for sure (self-contained,
    or without roll-forward to another major version) gets one line and no profiler; what may
    roll forward, or is .NET 8+, gets the profiler. The "app" is `env`, under the name of an
    apphost, so the variables it is given can be read."""

    def run_as_app(self, config):
        return run_launcher_on(self, [LAUNCHER], config)

    framework = staticmethod(runtimeconfig)

    def test_old_runtime_runs_unprofiled_with_a_line(self):
        for config, major in ((self.framework("6.0.0"), 6),
                              ('{"runtimeOptions": {"tfm": "net7.0", "includedFrameworks": '
                               '[{"name": "Microsoft.NETCore.App", "version": "7.0.20"}]}}', 7)):
            out, err = self.run_as_app(config)
            self.assertNotIn("CORECLR_PROFILER", out)
            self.assertRegex(err, rf"clrscope: \S+app\.runtimeconfig\.json asks for \.NET {major}; "
                             r"clrscope needs \.NET 8 or newer, so the app runs unprofiled")
            self.assertEqual(len(err.strip().splitlines()), 1, err)

    def test_supported_or_unknown_runtime_is_profiled(self):
        for config in (self.framework("8.0.0"), self.framework("6.0.0", ' "rollForward": "Major",'),
                       "not json"):
            out, err = self.run_as_app(config)
            self.assertIn(f"CORECLR_PROFILER={CLSID}", out, err)
            self.assertNotIn("asks for", err)


if __name__ == "__main__":
    unittest.main()
