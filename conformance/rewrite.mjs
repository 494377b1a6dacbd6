#!/usr/bin/env node
// Rewrites the stream path prefix baked into the installed conformance suite.
//
// The suite (@durable-streams/server-conformance-tests) builds every stream URL
// as `${baseUrl}/v1/stream/NAME`. ursula serves streams at /{bucket}/{stream},
// so we map the prefix onto a single bucket: `/v1/stream/` -> `/conformance/`.
//
// Usage: node rewrite.mjs [PREFIX]      (default PREFIX: /conformance/)
//        node rewrite.mjs /v1/stream/   (restores the pristine files)
//
// Idempotent and reversible: the first run saves each file as FILE.orig and
// every run regenerates FILE from FILE.orig, so the result depends only on
// PREFIX, never on what was applied before.
//
// Every path in the 0.3.6 suite is built with the literal `/v1/stream/`
// followed by a single segment ([a-z0-9-] plus Date.now()/Math.random()
// suffixes); the only helper that builds paths differently is
// `streamUrl = (path) => `${getBaseUrl()}/v1/stream/${path}`` in the
// (disabled by default) "Reserved subscription APIs" group, which still uses
// the same literal. We refuse to continue if the package ever contains
// `/v1/stream` not followed by `/`, or `v1/stream` without the leading slash,
// so a future version that concatenates paths differently fails loudly.

import { existsSync, readFileSync, readdirSync, writeFileSync, copyFileSync } from "node:fs"
import { join, dirname } from "node:path"
import { fileURLToPath } from "node:url"

const ORIGINAL = `/v1/stream/`
const OFFSET_LITERALS = [
  [`0000000000000000_0000000000000000`, `00000000000000000000`],
  [`9999999999999999_9999999999999999`, `99999999999999999999`],
]
const prefix = process.argv[2] ?? process.env.PREFIX ?? `/conformance/`

if (!/^\/([a-z0-9_-]+\/)+$/.test(prefix)) {
  console.error(`rewrite: prefix must look like /bucket/ (got ${JSON.stringify(prefix)})`)
  process.exit(2)
}

const here = dirname(fileURLToPath(import.meta.url))
const pkgDir = join(here, `node_modules`, `@durable-streams`, `server-conformance-tests`)
const distDir = join(pkgDir, `dist`)
if (!existsSync(distDir)) {
  console.error(`rewrite: ${distDir} not found; run npm ci first`)
  process.exit(2)
}

const version = JSON.parse(readFileSync(join(pkgDir, `package.json`), `utf8`)).version
if (version !== `0.3.6`) {
  console.error(`rewrite: expected server-conformance-tests 0.3.6, found ${version}`)
  process.exit(2)
}

// Every built file the runner can load (ESM entry + chunk, CJS twins, CLI, test-runner).
const files = readdirSync(distDir)
  .filter((f) => /\.(c|m)?js$/.test(f))
  .map((f) => join(distDir, f))

let total = 0
for (const file of files) {
  const orig = `${file}.orig`
  if (!existsSync(orig)) copyFileSync(file, orig)
  const pristine = readFileSync(orig, `utf8`)

  // Guard: any occurrence of v1/stream must be the exact `/v1/stream/` literal.
  const loose = pristine.match(/v1\/stream/g)?.length ?? 0
  const exact = pristine.split(ORIGINAL).length - 1
  if (loose !== exact) {
    console.error(`rewrite: ${file} builds /v1/stream paths in an unexpected way (${loose} vs ${exact})`)
    process.exit(3)
  }

  let out = pristine.split(ORIGINAL).join(prefix)
  // The fork tests hard-code the reference server's offsets for "zero" and
  // "past any tail" (every occurrence is in a `Fork - ` group); an Ursula
  // offset is 20 digits (spec/15), so they become ours. 20 nines exceed
  // u64: still refused, as the test expects.
  if (prefix !== ORIGINAL) {
    for (const [theirs, ours] of OFFSET_LITERALS) out = out.split(theirs).join(ours)
  }
  if (readFileSync(file, `utf8`) !== out) writeFileSync(file, out)
  total += exact
}

if (total === 0) {
  console.error(`rewrite: no ${ORIGINAL} in the saved originals; reinstall: rm -rf node_modules && npm ci`)
  process.exit(3)
}
console.log(`rewrite: ${total} occurrences of ${ORIGINAL} -> ${prefix} in ${files.length} files under dist/`)
