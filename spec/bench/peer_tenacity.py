"""peer_tenacity.py: tenacity's side of spec/bench/peers.sh.

The "fail k times, then succeed, no wait" loop: N calls of an operation that
raises 3 times, then returns, through tenacity's @retry with
stop_after_attempt(10), wait_none() and retry_if_exception_type (the
decorator is made once; each call goes through it).

With wait_none() tenacity still calls its sleep, time.sleep(0.0), before
each retry: that is what a user gets, and the "default" mode.  The "nosleep"
mode passes sleep=a no-op (a documented argument of @retry), leaving
tenacity's own bookkeeping alone.

Usage: python3 peer_tenacity.py [SECONDS [default|nosleep]]
  SECONDS: length of the timed run (default 0.25)
Prints: NS_PER_ATTEMPT CALLS VERSION
"""
import sys
import time

import tenacity
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_none

K = 3  # failures before the success


class Transient(Exception):
    pass


state = [0, 0]  # attempts in this call, attempts in all
MODE = sys.argv[2] if len(sys.argv) > 2 else "default"
if MODE not in ("default", "nosleep"):
    sys.exit("peer_tenacity: mode: default or nosleep")
EXTRA = {"sleep": lambda seconds: None} if MODE == "nosleep" else {}


@retry(stop=stop_after_attempt(10), wait=wait_none(),
       retry=retry_if_exception_type(Transient), reraise=True, **EXTRA)
def operation():
    state[0] += 1
    state[1] += 1
    if state[0] <= K:
        raise Transient("503")
    return 200


def run(n):
    state[1] = 0
    t0 = time.perf_counter_ns()
    for _ in range(n):
        state[0] = 0
        if operation() != 200:
            sys.exit("peer_tenacity: a call did not succeed")
    t = time.perf_counter_ns() - t0
    if state[1] != n * (K + 1):
        sys.exit("peer_tenacity: wrong number of attempts")
    return t / state[1]


def version():
    try:
        from importlib.metadata import version as v
        return v("tenacity")
    except Exception:
        return getattr(tenacity, "__version__", "?")


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 0.25
    n, t0 = 20, time.perf_counter()
    while True:  # warm up, and learn the pace
        per = run(n)
        n *= 2
        if time.perf_counter() - t0 >= 0.03:
            break
    calls = max(20, int(seconds * 1e9 / (per * (K + 1))))
    print("%.1f %d %s" % (run(calls), calls, version()))


main()
