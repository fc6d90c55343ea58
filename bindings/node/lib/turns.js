'use strict';
// The limits of work per turn of the event loop, shared by every agent and watch of this
// process: at most PER_TURN calls start and at most PER_TURN outcomes (a call's result, a
// watch's event) settle in one turn; the others go on at the next turns, in order.

const { CallCancelledError } = require('./errors');

const NOT_BEGUN = 'cancelled: the AbortSignal was aborted before the call began; nothing was written';

// Work per turn of the event loop. Starting a call costs this thread a few microseconds
// (encoding, the hand-off to the pool) and so does settling it (its result, the snapshot, the
// caller's continuation): a burst (a Promise.all of a thousand writes) started at once would hold
// the loop for as long as starting them all takes, and the completions, which the pool's threads
// hand back faster than this thread takes them, would all settle in the same pass of the loop.
// So at most PER_TURN calls start in one turn of the loop, and at most PER_TURN settle; the
// others wait in order (this process's calls, whichever agent they are on) and go on at the next
// turns, PER_TURN a turn, from setImmediate. A lone call neither waits nor costs a turn more.
const PER_TURN = 32;
const RESET_AT = PER_TURN / 2;

// One of the two limits: `enter()` is undefined while this turn has room and nobody waits, else
// a Promise resolved at a later turn, in order; with an AbortSignal, rejected with
// CallCancelledError when the signal aborts first (the call then never starts).
class Turns {
  constructor() {
    this.passed = 0; // since the count last started again (at most PER_TURN in a turn)
    this.waiting = []; // {signal, resolve, reject, onAbort}, oldest first from `head`;
    this.head = 0; // resolve is null once the signal aborted the wait
  }

  enter(signal) {
    if (this.head === this.waiting.length && this.passed < PER_TURN) {
      this.passed += 1;
      // The count starts again at the next turn once it is half full: calls a turn or more
      // apart, one at a time, schedule nothing (a lone call's turn would cost it an iteration
      // of the loop that does not wait for I/O).
      if (this.passed === RESET_AT) scheduleTurn();
      return undefined;
    }
    return new Promise((resolve, reject) => {
      const entry = { signal, resolve, reject, onAbort: null };
      if (signal !== undefined && signal !== null) {
        entry.onAbort = () => {
          entry.resolve = null;
          reject(new CallCancelledError(NOT_BEGUN));
        };
        signal.addEventListener('abort', entry.onAbort, { once: true });
      }
      this.waiting.push(entry);
      scheduleTurn();
    });
  }

  // At the loop's next turn: the count starts again and the next PER_TURN waiting go on (their
  // continuations run right after, in order). True when the count needs resetting at the next
  // turn too (half full already, or some still wait).
  next() {
    const { waiting } = this;
    let passed = 0;
    while (this.head < waiting.length && passed < PER_TURN) {
      const entry = waiting[this.head];
      waiting[this.head] = undefined;
      this.head += 1;
      if (entry.resolve === null) continue;
      if (entry.onAbort !== null) entry.signal.removeEventListener('abort', entry.onAbort);
      passed += 1;
      entry.resolve();
    }
    if (this.head === waiting.length) {
      this.waiting = [];
      this.head = 0;
    } else if (this.head >= 1024 && this.head * 2 >= waiting.length) {
      this.waiting = waiting.slice(this.head);
      this.head = 0;
    }
    this.passed = passed;
    return passed >= RESET_AT || this.head < this.waiting.length;
  }
}

const starts = new Turns();
const settles = new Turns();
let turnScheduled = false;

function scheduleTurn() {
  if (!turnScheduled) {
    turnScheduled = true;
    setImmediate(nextTurn);
  }
}

function nextTurn() {
  turnScheduled = false;
  // (Both run: `||` would skip the second.)
  const startsBusy = starts.next();
  const settlesBusy = settles.next();
  if (startsBusy || settlesBusy) scheduleTurn();
}

module.exports = { starts, settles, NOT_BEGUN, PER_TURN };
