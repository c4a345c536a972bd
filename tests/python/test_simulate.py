"""trainsim.simulate and trainsim.memory against `trainsim run --json` and `memory --json` (docs/python.md)."""

import json
import os
import threading
import time
import unittest

import trainsim
from support import NODES, TOPOLOGY, WORKLOAD, cli, cli_json, dumped, src

os.chdir(os.environ.get("TRAINSIM_SOURCE_DIR", "."))


class SimulateTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cli_text, cls.cli_doc = cli_json("run", "--topology", TOPOLOGY, "--workload", WORKLOAD, "--set",
                                             "topology.nodes=2")
        cls.doc = trainsim.simulate(TOPOLOGY, WORKLOAD, NODES)

    def test_equals_run_json_byte_for_byte(self):
        self.assertEqual(self.doc, self.cli_doc)
        self.assertEqual(dumped(self.doc), self.cli_text)
        self.assertGreater(self.doc["step_time_s"], 0)

    def test_dict_json_string_and_path_inputs_agree(self):
        with open(src(TOPOLOGY)) as f:
            topology = json.load(f)
        with open(src(WORKLOAD)) as f:
            workload_text = f.read()
        self.assertEqual(trainsim.simulate(topology, json.loads(workload_text), NODES), self.doc)
        self.assertEqual(trainsim.simulate(json.dumps(topology), workload_text, NODES), self.doc)
        import pathlib
        self.assertEqual(trainsim.simulate(pathlib.Path(TOPOLOGY), pathlib.Path(WORKLOAD), NODES), self.doc)

    def test_overrides_equal_set(self):
        overrides = {"topology.nodes": 2, "layout.tp": 4, "layout.dp": 2, "layout.recompute": "full",
                     "layout.sequence_parallel": True}
        _, expected = cli_json("run", "--topology", TOPOLOGY, "--workload", WORKLOAD, "--set", "topology.nodes=2",
                               "--set", "layout.tp=4", "--set", "layout.dp=2", "--set", "layout.recompute=full",
                               "--set", "layout.sequence_parallel=true")
        got = trainsim.simulate(TOPOLOGY, WORKLOAD, overrides)
        self.assertEqual(got, expected)
        self.assertNotEqual(got["step_time_s"], self.doc["step_time_s"])
        # A list of "key=value" strings is the same as the dict.
        self.assertEqual(trainsim.simulate(TOPOLOGY, WORKLOAD, [f"{k}={json.dumps(v) if not isinstance(v, str) else v}"
                                                                 for k, v in overrides.items()]), expected)

    def test_input_error_carries_the_cli_message(self):
        bad = "tests/e2e/data/misspelled-key.json"
        code, out, err = cli("run", "--topology", TOPOLOGY, "--workload", bad)
        self.assertEqual(code, 2)
        self.assertTrue(err.startswith("trainsim: error: "), err)
        with self.assertRaises(trainsim.InputError) as ctx:
            trainsim.simulate(TOPOLOGY, bad)
        self.assertEqual(str(ctx.exception), err[len("trainsim: error: "):].rstrip("\n"))
        self.assertIn(bad, str(ctx.exception))
        # An override the CLI refuses is refused with its message too.
        code, _, err = cli("run", "--topology", TOPOLOGY, "--workload", WORKLOAD, "--set", "layout.tp=3")
        self.assertEqual(code, 2)
        with self.assertRaises(ValueError) as ctx:
            trainsim.simulate(TOPOLOGY, WORKLOAD, {"layout.tp": 3})
        self.assertEqual(str(ctx.exception), err[len("trainsim: error: "):].rstrip("\n"))

    def test_exception_classes(self):
        self.assertTrue(issubclass(trainsim.InputError, ValueError))
        self.assertTrue(issubclass(trainsim.InternalError, RuntimeError))
        with self.assertRaises(trainsim.InputError):
            trainsim.simulate(TOPOLOGY, "no/such/workload.json")
        with self.assertRaises(trainsim.InputError) as ctx:
            trainsim.simulate(TOPOLOGY, "{\"name\": ")
        self.assertIn("workload (JSON string)", str(ctx.exception))
        with self.assertRaises(TypeError):
            trainsim.simulate(TOPOLOGY, 42)

    def test_memory_equals_memory_json(self):
        text, expected = cli_json("memory", "--topology", TOPOLOGY, "--workload", WORKLOAD, "--set",
                                  "topology.nodes=2")
        got = trainsim.memory(TOPOLOGY, WORKLOAD, NODES)
        self.assertEqual(got, expected)
        self.assertEqual(dumped(got), text)

    def test_memory_what_if_equals_memory_what_if_json(self):
        _, expected = cli_json("memory", "--topology", TOPOLOGY, "--workload", WORKLOAD, "--set",
                               "topology.nodes=2", "--what-if", "--max-events", "0")
        got = trainsim.memory(TOPOLOGY, WORKLOAD, NODES, what_if=True, max_events=0)
        self.assertEqual(got, expected)
        self.assertTrue(got["what_if"]["remedies"])

    def test_one_run_of_a_measured_runs_file(self):
        runs = "tests/e2e/data/runs-with-memory.json"
        text, expected = cli_json("run", "--from-runs", runs, "--id", "small_with_memory")
        got = trainsim.simulate(runs=runs, run_id="small_with_memory")
        self.assertEqual(dumped(got), text)
        with self.assertRaises(trainsim.InputError) as ctx:
            trainsim.simulate(runs=runs, run_id="nope")
        code, _, err = cli("run", "--from-runs", runs, "--id", "nope")
        self.assertEqual(code, 2)
        self.assertEqual(str(ctx.exception), err[len("trainsim: error: "):].rstrip("\n"))
        # Round 12: runs took a path only, where validate takes a dict or a JSON string too.
        with open(runs) as f:
            runs_text = f.read()
        for source in (runs_text, json.loads(runs_text)):
            self.assertEqual(trainsim.simulate(runs=source, run_id="small_with_memory"), expected)
        with self.assertRaisesRegex(trainsim.InputError, r'^runs \(dict\): --id "nope" names no run$'):
            trainsim.simulate(runs=json.loads(runs_text), run_id="nope")
        with self.assertRaisesRegex(TypeError, "runs: expected a path, a JSON string or a dict, not int"):
            trainsim.simulate(runs=5, run_id="small_with_memory")

    def test_flags_are_booleans(self):
        # Round 12: what_if=5 was taken as true, timeline="no" too; one line naming the argument.
        for kwargs, name in ((dict(what_if=5), "what_if"), (dict(timeline="no"), "timeline")):
            with self.assertRaisesRegex(TypeError, f"^memory: {name}: expected True or False, not "):
                trainsim.memory(TOPOLOGY, WORKLOAD, NODES, **kwargs)
        with self.assertRaisesRegex(TypeError, "^sweep: as_dataframe: expected True or False, not int$"):
            trainsim.sweep(TOPOLOGY, WORKLOAD, gpus=16, as_dataframe=1)

    def test_file_names_with_a_nul_byte_or_not_utf8(self):
        # Round 13: a NUL byte cut the name in the error ("/tmp/a"); a name os.fsdecode gives surrogates was
        # pybind11's many-line TypeError. Both one-line InputErrors naming the argument and the name.
        with self.assertRaisesRegex(trainsim.InputError, r"^topology: the file name '/tmp/a\\x00b.json' holds a NUL byte$"):
            trainsim.simulate("/tmp/a\x00b.json", WORKLOAD)
        with self.assertRaisesRegex(trainsim.InputError, r"^calibration: the file name '/tmp/\\udcff.json' is not valid UTF-8$"):
            trainsim.simulate(TOPOLOGY, WORKLOAD, NODES, calibration="/tmp/\udcff.json")

    def test_gil_released_while_simulating(self):
        # This thread runs Python code while simulate() is inside the simulator in another thread: with the GIL
        # held it could not (the simulator calls no Python and never yields), so no tick of this thread would
        # fall in the middle half of a call.
        ticks, calls = [], []
        done = threading.Event()

        longer = {"topology.nodes": 4, "layout.dp": 8, "layout.global_batch": 256}  # about 0.1 s

        def worker():
            for _ in range(3):
                t0 = time.monotonic()
                trainsim.simulate(TOPOLOGY, WORKLOAD, longer)
                calls.append((t0, time.monotonic()))
            done.set()

        t = threading.Thread(target=worker)
        t.start()
        while not done.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.0005)
        t.join()
        t0, t1 = max(calls, key=lambda c: c[1] - c[0])
        if t1 - t0 < 0.02:
            self.skipTest(f"a simulation took {1000 * (t1 - t0):.1f} ms: too short to tell")
        quarter = (t1 - t0) / 4
        inside = [x for x in ticks if t0 + quarter < x < t1 - quarter]
        self.assertGreater(len(inside), 0, f"no tick in the middle of a {1000 * (t1 - t0):.1f} ms simulation")


if __name__ == "__main__":
    unittest.main()
