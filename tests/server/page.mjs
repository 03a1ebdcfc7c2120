// The chat page at / in headless Chromium (Debian's, driven by playwright-core):
//   node page.mjs BASE_URL API_KEY SCREENSHOT.png
// Types a message, sends it, waits for the streamed reply to finish, checks it is there with
// its token count, sends a second turn, and saves a screenshot.
import {chromium} from 'playwright-core';
import assert from 'node:assert/strict';

const [base, key, shot] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
         '--disable-component-update', '--disable-sync'],
});
let ok = false;
try {
  const page = await browser.newPage({viewport: {width: 900, height: 640}});
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(base + '/');
  await page.fill('#key', key);
  await page.dispatchEvent('#key', 'change');
  for (const [i, text] of ['Hello, strata! What can you do?', 'And then?'].entries()) {
    await page.fill('#input', text);
    await page.click('#send');
    await page.waitForFunction((n) => document.querySelectorAll('.assistant[data-state="done"]').length === n ||
                                      document.querySelector('.error'), i + 1, {timeout: 120000});
    const err = await page.$('.error');
    assert.equal(err, null, err ? await err.textContent() : '');
    const replies = await page.$$eval('.assistant', (els) => els.map((e) => e.textContent));
    assert.equal(replies.length, i + 1);
    assert.match(replies[i], /\d+ tokens in \d+\.\d s$/);
    assert.ok(replies[i].replace(/\d+ tokens in .*$/, '').length > 0, 'empty reply');
    console.log(`ok   reply ${i + 1}: ${JSON.stringify(replies[i].slice(0, 80))}`);
  }
  await page.waitForFunction(() => document.getElementById('model').textContent === 'tiny-qwen3moe');
  console.log('ok   model shown: ' + await page.textContent('#model'));
  assert.deepEqual(errors, []);
  await page.screenshot({path: shot, fullPage: true});
  console.log('ok   screenshot ' + shot);
  ok = true;
} catch (e) {
  console.log('FAIL ' + (e.stack || e));
} finally {
  await browser.close();
}
process.exit(ok ? 0 : 1);
