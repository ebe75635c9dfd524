"""run.py MODULE - runs one hardening test module (tests/hardening) with unittest, with the
integration harness (tests/integration/harness.py) importable; prints 'N passed, N failed'."""
import importlib
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, HERE)


def main():
    names = sys.argv[1:] or [f[:-3] for f in sorted(os.listdir(HERE))
                             if f.startswith("test_") and f.endswith(".py")]
    suite = unittest.TestSuite()
    for n in names:
        suite.addTests(unittest.defaultTestLoader.loadTestsFromModule(importlib.import_module(n)))
    res = unittest.TextTestRunner(verbosity=2).run(suite)
    failed = len(res.failures) + len(res.errors)
    skipped = len(res.skipped)
    print(f"{res.testsRun - failed - skipped} passed, {failed} failed, {skipped} skipped")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
