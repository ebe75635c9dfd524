"""run.py MODULE - runs one integration test module with unittest; prints 'N passed, N failed'."""
import importlib
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
    names = sys.argv[1:] or [f[:-3] for f in sorted(os.listdir(os.path.dirname(__file__)))
                             if f.startswith("test_") and f.endswith(".py")]
    suite = unittest.TestSuite()
    for n in names:
        suite.addTests(unittest.defaultTestLoader.loadTestsFromModule(importlib.import_module(n)))
    res = unittest.TextTestRunner(verbosity=2).run(suite)
    failed = len(res.failures) + len(res.errors)
    skipped = len(res.skipped)
    passed = res.testsRun - failed - skipped
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
