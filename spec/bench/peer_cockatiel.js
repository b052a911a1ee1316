// peer_cockatiel.js: cockatiel's side of spec/bench/peers.sh.
//
// The "fail k times, then succeed, no wait" loop: N calls, one after the
// other, of an operation that throws 3 times, then returns, through
// retry(handleAll, { maxAttempts: 10, backoff: new ConstantBackoff(0) }),
// made once.  cockatiel waits even a 0 ms backoff with setTimeout, which
// Node makes at least 1 ms: that is what a user gets.
//
// Usage: node peer_cockatiel.js [SECONDS]   (default 0.25: one timed run)
// cockatiel is found through NODE_PATH (peers.sh: spec/bench/.peers/node_modules).
// Prints: NS_PER_ATTEMPT CALLS VERSION
'use strict';
const { retry, handleAll, ConstantBackoff } = require('cockatiel');

const K = 3; // failures before the success
const policy = retry(handleAll, { maxAttempts: 10, backoff: new ConstantBackoff(0) });
const state = [0, 0]; // attempts in this call, attempts in all

function operation() {
  state[0]++;
  state[1]++;
  if (state[0] <= K) throw new Error('503');
  return 200;
}

async function run(n) {
  state[1] = 0;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    state[0] = 0;
    if ((await policy.execute(operation)) !== 200) throw new Error('a call did not succeed');
  }
  const t = Number(process.hrtime.bigint() - t0);
  if (state[1] !== n * (K + 1)) throw new Error('wrong number of attempts');
  return t / state[1];
}

function version() {
  try {
    return require('cockatiel/package.json').version;
  } catch (e) {
    return '?';
  }
}

async function main() {
  const seconds = process.argv[2] ? Number(process.argv[2]) : 0.25;
  let n = 4, per;
  const t0 = Date.now();
  do { // warm up, and learn the pace
    per = await run(n);
    n *= 2;
  } while (Date.now() - t0 < 30);
  const calls = Math.max(20, Math.floor((seconds * 1e9) / (per * (K + 1))));
  console.log(`${(await run(calls)).toFixed(1)} ${calls} ${version()}`);
}

main().catch((e) => {
  console.error(`peer_cockatiel: ${e && e.message ? e.message : e}`);
  process.exit(1);
});
