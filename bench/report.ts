/**
 * Rebuilds bench/results/report.html and bench/results/summary.svg from the newest JSON of each
 * scenario under bench/results (`./dev bench` does this at the end of every run).
 *   node bench/report.ts
 */
import path from 'node:path';
import { latestResults, writeReports } from './lib/html-report.ts';
import { goalsText, issueGoals } from './lib/issue-goals.ts';
import { REPO_ROOT } from './lib/targets.ts';

const dir = path.join(REPO_ROOT, 'bench/results');
const files = writeReports(dir);
process.stdout.write(`${goalsText(issueGoals(latestResults(dir).results))}\nwrote ${files.map((f) => path.relative(REPO_ROOT, f)).join(', ')}\n`);
