/**
 * `skua-controlplane validate FILE|DIR…`: checks Istio YAML without serving. Each resource is
 * validated (Istio's schema and webhook rules), then all the valid ones are analysed together
 * (istioctl analyze's reference checks) and translated as the control plane would. One line per
 * problem on stdout: `<file>: <Error|Warning|Info> [<code>] (<Kind> <namespace>/<name>) <field>: <message>`.
 * Exit 0 when there is no error (warnings allowed), 1 otherwise, 2 on usage errors.
 */
import { statSync } from 'node:fs';
import { formatProblem, isError, type Problem } from './documents.ts';
import { configFiles, readFile, translateIstio } from './source.ts';

export const VALIDATE_USAGE = 'usage: skua-controlplane validate [--errors-only] FILE|DIR...';

export function runValidate(args: readonly string[], out: (line: string) => void = (l) => process.stdout.write(`${l}\n`), err: (line: string) => void = (l) => process.stderr.write(`${l}\n`)): number {
  const errorsOnly = args.includes('--errors-only');
  const paths = args.filter((a) => a !== '--errors-only');
  if (paths.length === 0 || paths.some((p) => p.startsWith('-'))) { err(VALIDATE_USAGE); return 2; }
  const files: string[] = [];
  for (const p of paths) {
    let dir = false;
    try { dir = statSync(p).isDirectory(); } catch { /* reported by readFile */ }
    files.push(...(dir ? configFiles(p) : [p]));
  }
  const problems: Problem[] = [];
  const resources = [];
  for (const f of files) {
    const docs = readFile(f);
    problems.push(...docs.flatMap((d) => d.problems));
    // As the control plane does: only documents without errors take part in the analysis.
    for (const d of docs) if (d.resource && !d.problems.some(isError)) resources.push(d.resource);
  }
  try {
    problems.push(...translateIstio('validate', resources).problems);
  } catch (e) {
    problems.push({ level: 'Error', code: 'SKUA0003', file: files.join(','), resource: 'mesh', field: '', message: `translation failed: ${(e as Error).message}` });
  }
  for (const p of problems) if (!errorsOnly || isError(p)) out(formatProblem(p));
  const errors = problems.filter(isError).length;
  err(`${files.length} file(s), ${resources.length} resource(s): ${errors} error(s), ${problems.length - errors} warning(s)/info`);
  return errors ? 1 : 0;
}
