"""docs/python.md: every ```python block runs, and prints what the ```text block after it shows."""

import os
import unittest

from doc_snippets import run

SOURCE_DIR = os.environ.get("TRAINSIM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


class DocsTest(unittest.TestCase):
    def test_python_md(self):
        os.chdir(SOURCE_DIR)
        problems = run("docs/python.md")
        hint = "PYTHONPATH=build/python python3 tests/python/doc_snippets.py --update docs/python.md"
        self.assertEqual(problems, [], "\n".join(problems) + f"\n({hint} rewrites the outputs)")


if __name__ == "__main__":
    unittest.main()
