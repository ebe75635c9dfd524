"""run.py MODULE - runs one hardening test module (tests/hardening) with unittest, with the
integration harness (tests/integration/harness.py) importable; prints each test's time and
'N passed, N failed, N skipped'."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, HERE)

from harness import run_modules  # noqa: E402


def main():
    names = sys.argv[1:] or [f[:-3] for f in sorted(os.listdir(HERE))
                             if f.startswith("test_") and f.endswith(".py")]
    sys.exit(run_modules(names))


if __name__ == "__main__":
    main()
