/** Problems found while building the mesh from valid resources (broken references, conflicts), istioctl-analyze style. */
import type { Problem } from '../documents.ts';
import type { Level } from '../reader.ts';
import { resourceId, type Meta } from '../types.ts';

export class Report {
  readonly problems: Problem[] = [];

  add(meta: Meta, level: Level, code: string, field: string, message: string): void {
    this.problems.push({ level, code, file: meta.file, resource: resourceId(meta), field, message });
  }

  /** IST0101 ReferencedResourceNotFound: `Referenced <what> not found: "<value>"`. */
  notFound(meta: Meta, field: string, what: string, value: string): void {
    this.add(meta, 'Error', 'IST0101', field, `Referenced ${what} not found: ${JSON.stringify(value)}`);
  }

  error(meta: Meta, field: string, message: string, code = 'SKUA0002'): void {
    this.add(meta, 'Error', code, field, message);
  }

  warn(meta: Meta, field: string, message: string, code = 'SKUA0002'): void {
    this.add(meta, 'Warning', code, field, message);
  }
}
