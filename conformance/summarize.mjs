#!/usr/bin/env node
// Summarises a vitest JSON report of suite.test.mjs.
// Usage: node summarize.mjs REPORT.json MODE
// Prints counts (and failed test names); exits 1 if any test failed or the
// report shows an error outside tests (e.g. a failing afterAll hook).

import { readFileSync, existsSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const [reportPath, mode = `array`] = process.argv.slice(2)
const here = dirname(fileURLToPath(import.meta.url))

if (!reportPath || !existsSync(reportPath)) {
  console.error(`summarize: report ${reportPath} not found (vitest crashed?)`)
  process.exit(1)
}
const report = JSON.parse(readFileSync(reportPath, `utf8`))

const excluded = new Set()
if (mode === `ndjson`) {
  for (const line of readFileSync(process.env.CONFORMANCE_EXCLUSIONS ?? join(here, `exclusions-ndjson.txt`), `utf8`).split(`\n`)) {
    if (line.trim() === `` || line.startsWith(`#`)) continue
    excluded.add(line.split(`\t`)[0])
  }
}

const counts = { collected: 0, forkCollected: 0, subsCollected: 0, subs: 0, passed: 0, failed: 0, fork: 0, ndjson: 0, otherSkipped: 0, fileErrors: 0 }
const failed = []
const otherSkipped = []

for (const file of report.testResults ?? []) {
  if (file.status === `failed` && file.message) {
    counts.fileErrors++
    console.error(`file-level error in ${file.name}:\n${file.message}`)
  }
  for (const t of file.assertionResults ?? []) {
    counts.collected++
    const name = [...t.ancestorTitles, t.title].join(` > `)
    const isFork = (t.ancestorTitles[0] ?? ``).startsWith(`Fork - `)
    // runConformanceTests only enables this group with { subscriptions: true },
    // which is not part of the base protocol; we never pass it.
    const isSubs = t.ancestorTitles[0] === `Reserved subscription APIs`
    if (isFork) counts.forkCollected++
    if (isSubs) counts.subsCollected++
    if (t.status === `passed`) counts.passed++
    else if (t.status === `failed`) {
      counts.failed++
      failed.push(name)
    } else if (isFork) counts.fork++
    else if (isSubs) counts.subs++
    else if (excluded.has(name)) counts.ndjson++
    else {
      counts.otherSkipped++
      otherSkipped.push(name)
    }
  }
}

const ran = counts.passed + counts.failed
const skipped = counts.fork + counts.subs + counts.ndjson + counts.otherSkipped
const nonFork = counts.collected - counts.forkCollected - counts.subsCollected

console.log(``)
console.log(`==== conformance summary (mode=${mode}) ====`)
console.log(`tests collected:        ${counts.collected}`)
console.log(`non-fork tests:         ${nonFork}  (excl. ${counts.subsCollected} gated "Reserved subscription APIs")`)
if (counts.forkCollected !== counts.fork && process.env.CONFORMANCE_FORKS !== `1`) {
  console.log(`WARNING: ${counts.forkCollected - counts.fork} fork tests were not skipped`)
}
console.log(`ran:                    ${ran}`)
console.log(`passed:                 ${counts.passed}`)
console.log(`failed:                 ${counts.failed}`)
console.log(`skipped:                ${skipped}`)
console.log(`  fork groups:          ${counts.fork}`)
console.log(`  subscription APIs:    ${counts.subs}`)
console.log(`  ndjson exclusions:    ${counts.ndjson}`)
console.log(`  other (-t filter):    ${counts.otherSkipped}`)
if (otherSkipped.length > 0 && process.env.CONFORMANCE_VERBOSE) {
  for (const n of otherSkipped) console.log(`    - ${n}`)
}
if (failed.length > 0) {
  console.log(`failed tests:`)
  for (const n of failed) console.log(`  FAIL ${n}`)
}
console.log(`RESULT: ${counts.failed === 0 && counts.fileErrors === 0 && report.success !== false ? `PASS` : `FAIL`} (${counts.passed}/${ran} passed)`)

process.exit(counts.failed === 0 && counts.fileErrors === 0 && report.success !== false ? 0 : 1)
