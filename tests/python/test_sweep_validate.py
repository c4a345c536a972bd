"""trainsim.sweep, sweep_report and validate against `trainsim sweep --json` and `validate --json`."""

import os
import sys
import types
import unittest

import trainsim
from support import TOPOLOGY, WORKLOAD, cli_json, dumped

os.chdir(os.environ.get("TRAINSIM_SOURCE_DIR", "."))

try:
    import pandas
except ImportError:
    pandas = None

RUNS = "tests/e2e/data/runs-with-memory.json"


class SweepTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # 24 GPUs, a reduced grid: tp 1,2 x pp 1,2 (and the rejected rest), one micro-batch, no recompute.
        cls.cli_text, cls.cli_doc = cli_json(
            "sweep", "--topology", TOPOLOGY, "--workload", WORKLOAD, "--gpus", "24", "--global-batch", "48",
            "--vary", "tp=1,2", "--vary", "pp=1,2", "--fix", "micro_batch=1", "--fix", "recompute=none",
            "--jobs", "1", "--exhaustive")  # trainsim.sweep simulates every layout
        cls.kwargs = dict(gpus=24, global_batch=48, vary={"tp": [1, 2], "pp": [1, 2]},
                          fix={"micro_batch": 1, "recompute": "none"}, jobs=1)

    def test_sweep_report_equals_sweep_json(self):
        doc = trainsim.sweep_report(TOPOLOGY, WORKLOAD, **self.kwargs)
        self.assertEqual(doc, self.cli_doc)
        self.assertEqual(dumped(doc), self.cli_text)

    def test_sweep_rows(self):
        rows = trainsim.sweep(TOPOLOGY, WORKLOAD, as_dataframe=False, **self.kwargs)
        self.assertEqual(rows, self.cli_doc["layouts"])
        self.assertEqual(len(rows), self.cli_doc["counts"]["layouts"])
        self.assertGreater(self.cli_doc["counts"]["simulated"], 1)
        counts = self.cli_doc["counts"]
        self.assertEqual(counts["simulated"] + counts["out_of_memory"] + counts["rejected"], len(rows))
        self.assertEqual({r["tp"] for r in rows}, {1, 2})
        self.assertEqual({r["pp"] for r in rows}, {1, 2})
        times = [r["step_time_s"] for r in rows if r["status"] == "simulated"]
        self.assertEqual(times, sorted(times))

    @unittest.skipIf(pandas is None, "pandas is not importable")
    def test_sweep_dataframe(self):
        df = trainsim.sweep(TOPOLOGY, WORKLOAD, **self.kwargs)
        self.assertIsInstance(df, pandas.DataFrame)
        self.assertEqual(len(df), self.cli_doc["counts"]["layouts"])
        self.assertIn("breakdown_s.compute", df.columns)

    @unittest.skipIf(pandas is not None, "pandas is importable")
    def test_sweep_without_pandas(self):
        self.assertIsInstance(trainsim.sweep(TOPOLOGY, WORKLOAD, **self.kwargs), list)
        with self.assertRaises(ImportError):
            trainsim.sweep(TOPOLOGY, WORKLOAD, as_dataframe=True, **self.kwargs)
        # Where pandas is importable, the rows go through pandas.json_normalize (a stand-in module here).
        stand_in = types.ModuleType("pandas")
        stand_in.json_normalize = lambda rows: ("normalized", rows)
        sys.modules["pandas"] = stand_in
        try:
            self.assertEqual(trainsim.sweep(TOPOLOGY, WORKLOAD, **self.kwargs),
                             ("normalized", self.cli_doc["layouts"]))
        finally:
            del sys.modules["pandas"]

    def test_sweep_without_gpus_takes_the_topologys_size(self):
        # As `sweep` without --gpus: the topology's nodes x gpus_per_node (here 2 x 8 by the override).
        kwargs = {k: v for k, v in self.kwargs.items() if k != "gpus"}
        doc = trainsim.sweep_report(TOPOLOGY, WORKLOAD, {"topology.nodes": 2}, **kwargs)
        self.assertEqual(doc["gpus"], 16)
        self.assertEqual(doc, trainsim.sweep_report(TOPOLOGY, WORKLOAD, gpus=16, **kwargs))

    def test_sweep_input_errors(self):
        with self.assertRaisesRegex(trainsim.InputError, "must be positive"):
            trainsim.sweep(TOPOLOGY, WORKLOAD, gpus=0)
        with self.assertRaisesRegex(trainsim.InputError, "not a multiple"):
            trainsim.sweep(TOPOLOGY, WORKLOAD, gpus=12)
        with self.assertRaisesRegex(trainsim.InputError, "fix"):
            trainsim.sweep(TOPOLOGY, WORKLOAD, gpus=16, fix={"tpp": 2})
        # Round 13: a list in fix ran as a vary (the CLI refuses `--fix tp=1,2`).
        with self.assertRaisesRegex(trainsim.InputError, r"^sweep: fix\['tp'\] = \[1, 2\]: fix takes one value; vary takes a list$"):
            trainsim.sweep(TOPOLOGY, WORKLOAD, gpus=16, fix={"tp": [1, 2]})
        # A comma list as a string, or a list of assignments, reached the core as "fix", which refused several
        # values only for "--fix" (review of round 13).
        for fix in ({"tp": "1,2"}, ["tp=1,2"]):
            with self.assertRaisesRegex(trainsim.InputError, r'fix "tp=1,2": fix takes one value; vary takes a list$'):
                trainsim.sweep(TOPOLOGY, WORKLOAD, gpus=16, fix=fix)

    def test_sweep_numeric_arguments_out_of_range(self):
        # Round 10: gpus=16.5 was cut to 16, jobs=-1 and 5000 ran on the hardware's threads (the CLI refuses
        # both), and an int past 32 or 64 bits gave pybind11's multi-line TypeError.
        cases = ((dict(gpus=16.5), "sweep: gpus = 16.5 must be an integer"),
                 (dict(gpus=float("nan")), "sweep: gpus = nan must be an integer"),
                 (dict(gpus=2**40), "sweep: gpus = 1099511627776 is above the limit of 131072"),
                 (dict(gpus=2**70), "sweep: gpus = 1180591620717411303424 is out of range"),
                 (dict(gpus=16, jobs=-1), r"sweep: jobs = -1 must be 1 \.\. 1024"),
                 (dict(gpus=16, jobs=5000), r"sweep: jobs = 5000 must be 1 \.\. 1024"),
                 (dict(gpus=16, global_batch=2**70), "sweep: global_batch = .* is out of range"))
        for kwargs, message in cases:
            with self.assertRaisesRegex(trainsim.InputError, message):
                trainsim.sweep_report(TOPOLOGY, WORKLOAD, **kwargs)
        with self.assertRaisesRegex(trainsim.InputError, "memory: max_events = 1180591620717411303424 is out of"):
            trainsim.memory(TOPOLOGY, WORKLOAD, max_events=2**70)

    def test_wrong_argument_types_are_one_line(self):
        # Round 11: run_id=5 or only=[None] reached the core, and pybind11's TypeError ("incompatible function
        # arguments") was many lines; a wrong type is now one line naming the argument, before the core.
        calls = ((lambda: trainsim.simulate(runs=RUNS, run_id=5), TypeError, "run_id: expected a str, not int"),
                 (lambda: trainsim.validate(RUNS, only=[None]), TypeError, "only: expected a str, not NoneType"),
                 (lambda: trainsim.validate(RUNS, only=b"x"), TypeError, "only: expected a run id or a list"),
                 (lambda: trainsim.validate(5), TypeError, "runs: expected a path, a JSON string or a dict"),
                 (lambda: trainsim.validate(RUNS, tolerance=None), TypeError, "tolerance: expected a number"),
                 (lambda: trainsim.validate(RUNS, tolerance="x"), trainsim.InputError,
                  "tolerance = 'x' must be a number"),
                 (lambda: trainsim.memory(TOPOLOGY, WORKLOAD, max_events=None), TypeError,
                  "memory: max_events: expected an integer, not NoneType"),
                 (lambda: trainsim.sweep_report(TOPOLOGY, WORKLOAD, gpus=[16]), TypeError,
                  "sweep: gpus: expected an integer, not list"),
                 (lambda: trainsim.simulate(TOPOLOGY, WORKLOAD, {"layout.tp": b"2"}), TypeError,
                  r"overrides\['layout.tp'\]: Object of type bytes"))
        for call, error, message in calls:
            with self.assertRaisesRegex(error, message) as ctx:
                call()
            self.assertNotIn("\n", str(ctx.exception))

    def test_sweep_vary_refuses_a_repeated_value(self):
        # As `sweep --vary tp=2,4,2` (round 11): the repeat was dropped without a word.
        with self.assertRaisesRegex(trainsim.InputError, 'vary tp: "2" is given twice'):
            trainsim.sweep(TOPOLOGY, WORKLOAD, gpus=16, vary={"tp": [2, 4, 2]})

    def test_sweep_refuses_an_override_the_grid_sets(self):
        # As `trainsim sweep --set` (round 8): the grid would override it at every point, silently.
        for key, value in (("layout.cp", 2), ("layout.recompute", "full"), ("layout.tp", 2)):
            with self.assertRaisesRegex(trainsim.InputError, "the sweep sets " + key + " at each point"):
                trainsim.sweep(TOPOLOGY, WORKLOAD, {key: value}, gpus=16)
        with self.assertRaisesRegex(trainsim.InputError, "all ZeRO stage 0"):
            trainsim.sweep(TOPOLOGY, WORKLOAD, {"layout.zero_stage": 3}, gpus=16)
        # An override of a layout not of the topology's size is swept as the CLI sweeps it (it was refused:
        # "... does not equal the cluster's GPUs = 1024").
        fix = {"tp": 2, "pp": 2, "micro_batch": 1, "recompute": "none"}
        _, expected = cli_json("sweep", "--topology", TOPOLOGY, "--workload", WORKLOAD, "--set",
                               "model.seq_len=1024", "--gpus", "16", "--fix", "tp=2", "--fix", "pp=2", "--fix",
                               "micro_batch=1", "--fix", "recompute=none", "--jobs", "1",
                               "--exhaustive")
        self.assertEqual(trainsim.sweep_report(TOPOLOGY, WORKLOAD, {"model.seq_len": 1024}, gpus=16, fix=fix,
                                               jobs=1), expected)
        # Two values for one thing: the keyword silently won.
        with self.assertRaisesRegex(trainsim.InputError, "makes the cluster 32 GPUs and gpus = 16"):
            trainsim.sweep(TOPOLOGY, WORKLOAD, {"topology.nodes": 4}, gpus=16)
        with self.assertRaisesRegex(trainsim.InputError, "give two global batches"):
            trainsim.sweep(TOPOLOGY, WORKLOAD, {"layout.global_batch": 64}, gpus=16, global_batch=32)


class ValidateTest(unittest.TestCase):
    def test_validate_equals_validate_json(self):
        text, expected = cli_json("validate", RUNS, "--jobs", "1", ok_codes=(0, 4))
        doc = trainsim.validate(RUNS, jobs=1)
        self.assertEqual(doc, expected)
        self.assertEqual(dumped(doc), text)
        summary = doc["summary"]
        for key in ("runs", "simulated", "scored", "oom", "errors"):
            self.assertIn(key, summary)
        for key in ("count", "mape_pct", "max_abs_error_pct", "within_tolerance"):
            self.assertIn(key, summary["step_time_s"])
            self.assertIn(key, summary["peak_memory_GiB"])
        self.assertEqual(summary["peak_memory_GiB"]["count"], 1)
        # No collective rows: no bus-bandwidth error, not one of 0%.
        self.assertEqual(summary["collectives_busbw"]["count"], 0)
        self.assertIsNone(summary["collectives_busbw"]["mape_pct"])
        self.assertIsNone(summary["collectives_busbw"]["max_abs_error_pct"])
        self.assertEqual(summary["runs"], 1)
        self.assertEqual(summary["simulated"], 1)

    def test_validate_dict_input_and_options(self):
        import json
        with open(RUNS) as f:
            runs = json.load(f)
        by_path = trainsim.validate(RUNS, tolerance=5, jobs=1)
        self.assertEqual(trainsim.validate(runs, tolerance=5, jobs=1)["summary"], by_path["summary"])
        _, expected = cli_json("validate", RUNS, "--tolerance", "5", "--jobs", "1", ok_codes=(0, 4))
        self.assertEqual(by_path, expected)
        with self.assertRaisesRegex(trainsim.InputError, "no run or collective"):
            trainsim.validate(RUNS, only=["no-such-run"])
        with self.assertRaisesRegex(trainsim.InputError, "names run id \"a\" twice"):
            trainsim.validate(RUNS, only=["a", "a"])
        # Round 10: as `validate --tolerance` and `--jobs` (inf and -3 were taken).
        with self.assertRaisesRegex(trainsim.InputError, "tolerance = inf must be a percentage from 0 to 1e6"):
            trainsim.validate(RUNS, tolerance=float("inf"))
        with self.assertRaisesRegex(trainsim.InputError, r"validate: jobs = -3 must be 1 \.\. 1024"):
            trainsim.validate(RUNS, jobs=-3)


if __name__ == "__main__":
    unittest.main()
