"""`cmake --install` puts an importable trainsim in the platform's site-packages folder under the prefix."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

BUILD_DIR = os.environ.get("TRAINSIM_BUILD_DIR")
INSTALL_DIR = os.environ.get("TRAINSIM_PYTHON_INSTALL_DIR", "")
CMAKE = os.environ.get("CMAKE_COMMAND", shutil.which("cmake") or "cmake")


@unittest.skipIf(not BUILD_DIR, "TRAINSIM_BUILD_DIR is not set (ctest sets it)")
@unittest.skipIf(os.path.isabs(INSTALL_DIR), "TRAINSIM_PYTHON_INSTALL_DIR is absolute: not under a prefix")
class InstallTest(unittest.TestCase):
    def test_installed_module_imports_and_simulates(self):
        with tempfile.TemporaryDirectory() as prefix:
            subprocess.run([CMAKE, "--install", BUILD_DIR, "--prefix", prefix], check=True, capture_output=True)
            site = os.path.join(prefix, INSTALL_DIR)
            self.assertTrue(os.path.isfile(os.path.join(site, "trainsim", "__init__.py")))
            overrides = "{'topology.nodes': 2, 'layout.pp': 2, 'layout.dp': 1}"
            code = (f"import trainsim\nd = trainsim.memory(overrides={overrides}, max_events=1)\n"
                    "print(trainsim.__file__, d['gpus'])")
            env = dict(os.environ, PYTHONPATH=site)
            p = subprocess.run([sys.executable, "-c", code], cwd=prefix, env=env, capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            where, gpus = p.stdout.split()
            self.assertTrue(where.startswith(site), where)
            self.assertEqual(gpus, "16")


if __name__ == "__main__":
    unittest.main()
