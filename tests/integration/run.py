"""run.py MODULE - runs one integration test module with unittest; prints each test's time and
'N passed, N failed, N skipped'."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import run_modules  # noqa: E402


def main():
    names = sys.argv[1:] or [f[:-3] for f in sorted(os.listdir(os.path.dirname(__file__)))
                             if f.startswith("test_") and f.endswith(".py")]
    sys.exit(run_modules(names))


if __name__ == "__main__":
    main()
