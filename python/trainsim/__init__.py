"""trainsim: a discrete-event simulator of LLM training clusters, from Python (docs/python.md).

Each function runs what the command of the same name runs and returns what it prints with --json, as Python
objects (json.loads of the same text):

    simulate(...)  = trainsim run --json          memory(...)   = trainsim memory --json
    sweep(...)     = the "layouts" of trainsim sweep --json (a pandas DataFrame when pandas is importable)
    sweep_report(...) = the whole trainsim sweep --json
    validate(...)  = trainsim validate --json

Inputs (topology, workload, measured runs) are given as a path (str or os.PathLike), a JSON string (a str that
starts with "{"), or a dict; None is the CLI's default, the embedded GPT-3 175B on 1024 A100 (TP 8 x PP 16 x
DP 8). `overrides` is a dict {"layout.tp": 8, "topology.nodes": 2, ...} applied as --set key=value (a str value
as written, any other value as JSON). Bad input raises trainsim.InputError (a ValueError) with the CLI's
one-line message; a bug raises trainsim.InternalError (a RuntimeError). The simulation releases the GIL, so
threads may simulate in parallel.
"""

import json
import operator
import os
from collections.abc import Iterable, Mapping

from . import _core

__all__ = ["simulate", "memory", "sweep", "sweep_report", "validate", "InputError", "InternalError"]
__version__ = _core.__version__

InputError = _core.InputError
InternalError = _core.InternalError
InputError.__module__ = InternalError.__module__ = __name__


def _source(value, what):
    """One input: a path, a JSON string or a dict (what names it in error messages); None: the default."""
    if value is None:
        return _core.Source()
    if isinstance(value, Mapping):
        return _core.Source(text=json.dumps(value), name=f"{what} (dict)")
    if isinstance(value, str) and value.lstrip().startswith("{"):
        return _core.Source(text=value, name=f"{what} (JSON string)")
    if isinstance(value, (str, os.PathLike)):
        return _core.Source(file=_file_name(value, what))
    raise TypeError(f"{what}: expected a path, a JSON string or a dict, not {type(value).__name__}")


def _file_name(value, what):
    """A path for the core: a NUL byte cut it there (the error named "/tmp/a" for "/tmp/a\\x00b.json") and a
    name that is not UTF-8 (os.fsdecode's surrogates) was pybind11's many-line TypeError: both an InputError
    naming it (round 13)."""
    path = os.fspath(value)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    shown = repr(path[:80]) + (f"...({len(path)} characters)" if len(path) > 80 else "")
    if "\x00" in path:
        raise InputError(f"{what}: the file name {shown} holds a NUL byte")
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"{what}: the file name {shown} is not valid UTF-8") from None
    return path


def _path(value, what):
    if value is None:
        return ""
    if isinstance(value, (str, os.PathLike)):
        return _file_name(value, what)
    raise TypeError(f"{what}: expected a path, not {type(value).__name__}")


def _value(v, what):
    """A value as --set / --fix / --vary read it: a str as written, a bool as true/false, else JSON (a value
    JSON cannot hold is a TypeError naming `what`)."""
    if isinstance(v, str):
        return v
    try:
        return json.dumps(v)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{what}: {e}") from None


def _str(value, what):
    """A str argument (a run id). Another type reached the core, whose pybind11 TypeError is many lines
    (round 10's open item); it is one line naming the argument."""
    if isinstance(value, str):
        return value
    raise TypeError(f"{what}: expected a str, not {type(value).__name__}")


def _float(value, what):
    """A number argument (a tolerance): an int or float, or a str holding one; else an error naming it."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            raise InputError(f"{what} = {value[:80]!r} must be a number") from None
    raise TypeError(f"{what}: expected a number, not {type(value).__name__}")


def _bool(value, what):
    """A flag argument: True or False. Another value (what_if=5, "no") was taken for its truth value; a
    TypeError naming the argument now (round 12)."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":  # numpy's bool too
        return bool(value)
    raise TypeError(f"{what}: expected True or False, not {type(value).__name__}")


def _int(value, what):
    """An integer argument (an int, or a float or str holding a whole number) for the core's 64-bit
    parameters. A fraction (gpus=16.5 was cut to 16), NaN or a value past 64 bits (2**70 gave pybind11's
    "incompatible function arguments") is an InputError naming it; a type that is no number stays a TypeError."""
    if isinstance(value, float):
        if not value.is_integer():
            raise InputError(f"{what} = {value} must be an integer")
        value = int(value)
    elif isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            raise InputError(f"{what} = {value[:80]!r} must be an integer") from None
    else:
        try:
            value = operator.index(value)
        except TypeError:
            raise TypeError(f"{what}: expected an integer, not {type(value).__name__}") from None
    if not -2**63 <= value < 2**63:
        raise InputError(f"{what} = {value} is out of range")
    return value


def _assignments(pairs, what, join_lists=False):
    """{"key": value} (or an iterable of "key=value" strings) as the strings of --set, --fix or --vary."""
    if pairs is None:
        return []
    if isinstance(pairs, str):
        return [pairs]
    if isinstance(pairs, Mapping):
        out = []
        for k, v in pairs.items():
            if join_lists and isinstance(v, (list, tuple)):
                out.append(f"{k}={','.join(_value(x, f'{what}[{k!r}]') for x in v)}")
            else:
                out.append(f"{k}={_value(v, f'{what}[{k!r}]')}")
        return out
    if isinstance(pairs, Iterable):
        return [str(p) for p in pairs]
    raise TypeError(f"{what}: expected a dict of key: value, not {type(pairs).__name__}")


def _common(topology, workload, overrides, calibration, profile):
    return dict(topology=_source(topology, "topology"), workload=_source(workload, "workload"),
                sets=_assignments(overrides, "overrides"), calibration=_path(calibration, "calibration"),
                profile=_path(profile, "profile"))


def simulate(topology=None, workload=None, overrides=None, *, calibration=None, profile=None, runs=None,
             run_id=None):
    """One training iteration simulated: the report of `trainsim run --json` as a dict (step_time_s,
    tokens_per_s, mfu, breakdown_s, memory, ...). runs + run_id: one run of a measured-runs file instead
    (--from-runs FILE --id ID; runs a path, a JSON string or a dict, as validate's). A layout that does not
    fit is reported (memory ... fits), not raised."""
    return json.loads(_core.run(**_common(topology, workload, overrides, calibration, profile),
                                runs=_source(runs, "runs"),
                                run_id="" if run_id is None else _str(run_id, "run_id")))


def memory(topology=None, workload=None, overrides=None, *, what_if=False, timeline=False,
           max_events=_core.DEFAULT_MEMORY_MAX_EVENTS, calibration=None, profile=None):
    """Memory per GPU of every pipeline stage and phase, by pile: `trainsim memory --json` as a dict;
    what_if=True adds the remedies (--what-if), timeline=True every sample (--timeline); max_events as
    --max-events (0: no bound)."""
    return json.loads(_core.memory(**_common(topology, workload, overrides, calibration, profile),
                                   what_if=_bool(what_if, "memory: what_if"),
                                   timeline=_bool(timeline, "memory: timeline"),
                                   max_events=_int(max_events, "memory: max_events")))


def sweep_report(topology=None, workload=None, overrides=None, *, gpus=None, fix=None, vary=None,
                 global_batch=None, jobs=None, calibration=None, profile=None):
    """Every layout of the workload's model on `gpus` GPUs (default: the topology's size, as `sweep`
    without --gpus): `trainsim sweep --gpus N --json` as a dict (format trainsim-sweep/1: counts,
    reject_reasons, layouts ranked by step time, best). fix={"tp": 8} as --fix tp=8; vary={"tp": [4, 8]} as
    --vary tp=4,8; jobs: threads (default: the hardware's; the result does not depend on it)."""
    gpus = None if gpus is None else _int(gpus, "sweep: gpus")
    if isinstance(fix, Mapping):  # as `sweep --fix tp=1,2`: fix={"tp": [1, 2]} ran as a vary (round 13)
        for k, v in fix.items():
            if isinstance(v, (list, tuple)):
                raise InputError(f"sweep: fix[{k!r}] = {str(v)[:80]}: fix takes one value; vary takes a list")
    if gpus is not None and gpus <= 0:
        raise InputError(f"sweep: gpus = {gpus} must be positive")
    return json.loads(_core.sweep(**_common(topology, workload, overrides, calibration, profile),
                                  gpus=gpus or 0, fix=_assignments(fix, "fix", join_lists=True),
                                  vary=_assignments(vary, "vary", join_lists=True),
                                  global_batch=_int(global_batch or 0, "sweep: global_batch"),
                                  jobs=_int(jobs or 0, "sweep: jobs")))


def sweep(topology=None, workload=None, overrides=None, *, gpus=None, fix=None, vary=None, global_batch=None,
          jobs=None, calibration=None, profile=None, as_dataframe=None):
    """The layouts of sweep_report(...) (one dict per layout, best first, then the out-of-memory and the
    rejected ones). as_dataframe=None (default): a pandas DataFrame when pandas is importable (nested fields
    flattened: breakdown_s.compute, ...), else the list; True: a DataFrame (ImportError without pandas);
    False: the list."""
    if as_dataframe is not None:
        as_dataframe = _bool(as_dataframe, "sweep: as_dataframe")
    rows = sweep_report(topology, workload, overrides, gpus=gpus, fix=fix, vary=vary, global_batch=global_batch,
                        jobs=jobs, calibration=calibration, profile=profile)["layouts"]
    if as_dataframe is False:
        return rows
    try:
        import pandas
    except ImportError:
        if as_dataframe:
            raise
        return rows
    return pandas.json_normalize(rows)


def validate(runs, *, tolerance=_core.DEFAULT_TOLERANCE_PCT, only=None, calibration=None, profile=None,
             jobs=None):
    """Simulates every run of measured-runs files (trainsim-measured-runs/1; a path, JSON string or dict, or
    a list of them) and compares: `trainsim validate --json` as a dict (runs, summary, collectives, notes).
    tolerance: percent (--tolerance); only: run ids (--only); jobs: threads."""
    if isinstance(runs, (str, os.PathLike, Mapping)):
        runs = [runs]
    if not isinstance(runs, Iterable):
        raise TypeError(f"runs: expected a path, a JSON string or a dict, or a list of them, not "
                        f"{type(runs).__name__}")
    files = [_source(r, "runs") for r in runs]
    if only is None or isinstance(only, str):
        only = [] if only is None else [only]
    elif isinstance(only, Iterable) and not isinstance(only, (bytes, bytearray, Mapping)):
        only = [_str(x, "only") for x in only]
    else:
        raise TypeError(f"only: expected a run id or a list of them, not {type(only).__name__}")
    tolerance = _float(tolerance, "validate: tolerance")
    return json.loads(_core.validate(files=files, tolerance_pct=tolerance, only=only,
                                     calibration=_path(calibration, "calibration"),
                                     profile=_path(profile, "profile"), jobs=_int(jobs or 0, "validate: jobs")))
