"""A Python workload for scripts/gate-fpr.sh, profiled with py-spy: the shape of
native.c (a fixed amount of work over functions of different weights, cache_miss's
share drawn per run, 2 to 6 %), so that the profile has a few heavy functions and
several of a few percent. GATE_SLOW_PERCENT=N gives compress extra work equal to N % of
the program's (a slowdown of N % of the run, all in one function)."""

import os
import random
import sys
import types

# Units of work for the whole run; about two seconds on CPython 3.11.
REQUESTS = 300
UNIT = 400


def _work(units):
    x = 1
    for _ in range(units * UNIT):
        x = (x * 1103515245 + 12345) & 0xFFFFFFFF
    return x


def work_function(name):
    """_work under another name: py-spy names a frame by its code's (qualified) name, so
    each of these has its own flat time."""
    names = {"co_name": name}
    if sys.version_info >= (3, 11):
        names["co_qualname"] = name
    return types.FunctionType(_work.__code__.replace(**names), globals(), name)


# Each function's units a request (percent of the work), as in native.c.
WEIGHTS = {
    "parse": 30,
    "hash": 20,
    "compress": 15,
    "sort_keys": 10,
    "encode": 8,
    "checksum": 5,
    "cache_miss": None,  # 2 to 6, drawn per run
    "log_line": 3,
    "validate": 2,
    "lookup": 1,
}
FUNCTIONS = {name: work_function(name) for name in WEIGHTS}


def handle(cache, extra):
    for name, units in WEIGHTS.items():
        units = cache if units is None else units
        FUNCTIONS[name](units + (extra if name == "compress" else 0))


def main():
    percent = int(os.environ.get("GATE_SLOW_PERCENT", "0"))
    cache = random.randint(2, 6)
    extra = REQUESTS * 100 * percent // 100
    for r in range(REQUESTS):
        handle(cache, extra * (r + 1) // REQUESTS - extra * r // REQUESTS)


if __name__ == "__main__":
    main()
