"""peer_urllib3.py: urllib3's side of spec/bench/peers.sh.

The "fail k times, then succeed, no wait" loop without a network: N calls
of an operation that answers 503 three times, then 200, each driven the way
urllib3's connection pool drives a response (HTTPConnectionPool.urlopen):
is_retry(method, status, has_retry_after), then increment(method, url,
response=...), which returns a new Retry (or raises MaxRetryError when
exhausted), then sleep(response), which returns at once with
backoff_factor=0 and no Retry-After.  The policy: Retry(total=10,
backoff_factor=0, status_forcelist=the statuses policies/http.lua retries),
made once; each call starts from it, as each request does.

Usage: python3 peer_urllib3.py [SECONDS]   (default 0.25: one timed run)
Prints: NS_PER_ATTEMPT CALLS VERSION
"""
import sys
import time

import urllib3
from urllib3.util.retry import Retry

K = 3  # failures before the success
METHOD, URL = "GET", "http://service.invalid/v1/items"
POLICY = Retry(total=10, backoff_factor=0,
               status_forcelist=[408, 429, 500, 502, 503, 504])


class Response:
    """What Retry reads of an HTTPResponse: status, headers, redirect."""
    __slots__ = ("status",)
    headers = {}

    def __init__(self, status):
        self.status = status

    def getheader(self, name, default=None):  # urllib3 1.x
        return default

    def get_redirect_location(self):
        return False


FAILED, OK = Response(503), Response(200)
state = [0, 0]  # attempts in this call, attempts in all


def operation():
    state[0] += 1
    state[1] += 1
    return FAILED if state[0] <= K else OK


def call():
    retries = POLICY
    while True:
        response = operation()
        has_retry_after = bool(response.headers.get("Retry-After"))
        if not retries.is_retry(METHOD, response.status, has_retry_after):
            return response
        retries = retries.increment(METHOD, URL, response=response)
        retries.sleep(response)


def run(n):
    state[1] = 0
    t0 = time.perf_counter_ns()
    for _ in range(n):
        state[0] = 0
        if call().status != 200:
            sys.exit("peer_urllib3: a call did not succeed")
    t = time.perf_counter_ns() - t0
    if state[1] != n * (K + 1):
        sys.exit("peer_urllib3: wrong number of attempts")
    return t / state[1]


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 0.25
    n, t0 = 20, time.perf_counter()
    while True:  # warm up, and learn the pace
        per = run(n)
        n *= 2
        if time.perf_counter() - t0 >= 0.03:
            break
    calls = max(20, int(seconds * 1e9 / (per * (K + 1))))
    print("%.1f %d %s" % (run(calls), calls, urllib3.__version__))


main()
