// Test support: Chromium driven by playwright-core (no browser download:
// the system's /usr/bin/chromium, or $CHROMIUM_PATH), and screenshots
// saved under browser-test/artifacts/.

import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

export const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
export const ARTIFACTS = fileURLToPath(new URL("../browser-test/artifacts/", import.meta.url));

const ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  // Without these, Chromium's own background connections are refused by a
  // closed network and can stall the browser.
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

export async function launchChromium() {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`Chromium not found at ${CHROMIUM} (install it: apt-get install -y chromium, or set CHROMIUM_PATH)`);
  }
  return chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true });
}

/** Saves a full-page screenshot as artifacts/NAME.png; prints and returns its path. */
export async function screenshot(page, name) {
  await mkdir(ARTIFACTS, { recursive: true });
  const path = join(ARTIFACTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  console.log(`screenshot: ${path}`);
  return path;
}

/** Collects a page's console messages and errors, for failure reports. */
export function recordConsole(page, into = []) {
  page.on("console", (msg) => into.push(`[${msg.type()}] ${msg.text()}`));
  page.on("pageerror", (err) => into.push(`[pageerror] ${err}`));
  return into;
}
