// Test support: start `ursula` processes (a development node, a gateway)
// on ephemeral ports, and stop every one of them when the test ends, fails
// or is interrupted. Only the processes started here are ever signalled,
// each by its own pid.

import { spawn } from "node:child_process";

/** The `ursula` binary: $URSULA_BIN, else `ursula` on the PATH. */
export function ursulaBin() {
  return process.env.URSULA_BIN || "ursula";
}

const running = new Set();

function killAll(signal) {
  for (const proc of running) {
    try {
      proc.child.kill(signal);
    } catch {
      // already gone
    }
  }
}

// Last resort: whatever ends this process takes its children along.
process.on("exit", () => killAll("SIGKILL"));
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.once(signal, () => {
    killAll("SIGKILL");
    process.exit(128 + ({ SIGINT: 2, SIGTERM: 15, SIGHUP: 1 })[signal]);
  });
}

/** Polls `probe` until it returns a truthy value; that value is returned. */
export async function waitFor(probe, { timeout = 30_000, interval = 50, what = "a condition" } = {}) {
  const deadline = Date.now() + timeout;
  let last;
  for (;;) {
    try {
      const value = await probe();
      if (value) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeout} ms waiting for ${what}${last ? `: ${last}` : ""}`);
    }
    await new Promise((r) => setTimeout(r, interval));
  }
}

/** A child process with its output kept, and a way to wait for a line. */
export class Proc {
  constructor(name, command, args, options = {}) {
    this.name = name;
    this.output = "";
    this.exited = null;
    this.child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"], ...options });
    running.add(this);
    this.exitPromise = new Promise((resolve) => {
      this.child.once("exit", (code, signal) => {
        this.exited = { code, signal };
        running.delete(this);
        resolve(this.exited);
      });
      this.child.once("error", (err) => {
        this.output += `\n[spawn error] ${err}\n`;
        this.exited = { code: null, signal: null, error: err };
        running.delete(this);
        resolve(this.exited);
      });
    });
    this.waiters = [];
    const take = (text) => {
      this.output += text;
      if (this.output.length > 200_000) this.output = this.output.slice(-100_000);
      this.waiters = this.waiters.filter((w) => !w.check());
    };
    this.child.stdout.setEncoding("utf8").on("data", take);
    this.child.stderr.setEncoding("utf8").on("data", take);
  }

  /** Resolves to the first match of `pattern` in the output so far. */
  waitForOutput(pattern, timeout = 30_000) {
    return new Promise((resolve, reject) => {
      const waiter = {
        check: () => {
          const match = pattern.exec(this.output);
          if (match) {
            clearTimeout(timer);
            resolve(match);
            return true;
          }
          return false;
        },
      };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(new Error(`${this.name}: no ${pattern} within ${timeout} ms; output:\n${this.output}`));
      }, timeout);
      if (waiter.check()) return;
      this.exitPromise.then((exit) => {
        if (waiter.check()) return;
        clearTimeout(timer);
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(new Error(`${this.name} exited (${JSON.stringify(exit)}) before ${pattern}; output:\n${this.output}`));
      });
      this.waiters.push(waiter);
    });
  }

  /** SIGTERM, then SIGKILL if it has not exited within `grace` ms. */
  async stop(grace = 5_000) {
    if (this.exited) return this.exited;
    this.child.kill("SIGTERM");
    const timer = setTimeout(() => this.child.kill("SIGKILL"), grace);
    const exit = await this.exitPromise;
    clearTimeout(timer);
    return exit;
  }
}

/** Stops every process started here that still runs. */
export async function stopAll() {
  await Promise.all([...running].map((proc) => proc.stop()));
}

/** `ursula server --listen 127.0.0.1:0`: the in-memory development node. */
export async function startDevNode() {
  const proc = new Proc("ursula dev node", ursulaBin(), ["server", "--listen", "127.0.0.1:0"], {
    env: { ...process.env, URSULA_LOG: process.env.URSULA_LOG ?? "warn" },
  });
  const [, url] = await proc.waitForOutput(/^ursula listening on (http:\/\/\S+)$/m);
  return { proc, url, stop: () => proc.stop() };
}

/**
 * `ursula gateway --listen 127.0.0.1:0 --upstream URL ...`; resolves once it
 * serves. `ready` is an async probe; without it, `/__ursula/ready` must
 * answer 200 (an access-controlled gateway conceals that route: pass a
 * probe that asks as an owner).
 */
export async function startGateway({ upstream, args = [], ready }) {
  const proc = new Proc(
    "ursula gateway",
    ursulaBin(),
    ["gateway", "--listen", "127.0.0.1:0", "--upstream", upstream, ...args],
    { env: { ...process.env, URSULA_LOG: process.env.URSULA_LOG ?? "warn" } },
  );
  const [, url] = await proc.waitForOutput(/^ursula gateway listening on (http:\/\/\S+)$/m);
  const probe = ready ?? (async () => (await fetch(`${url}/__ursula/ready`)).status === 200);
  await waitFor(() => probe(url), { timeout: 60_000, interval: 100, what: `the gateway at ${url} to serve` });
  return { proc, url, stop: () => proc.stop() };
}
