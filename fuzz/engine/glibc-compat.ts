/**
 * Makes Jazzer.js's prebuilt libFuzzer addon load on Debian 12 (glibc 2.36, GCC 12's libstdc++).
 *
 * The addon npm ships was linked against glibc 2.38 / GCC 13, but uses only three symbols newer than
 * what Debian 12 has: `__isoc23_strtol` and `__isoc23_strtoul` (C23 spellings of strtol/strtoul; they
 * differ only in also reading "0b" prefixes, which libFuzzer's flag parsing never meets), and
 * `std::ios_base_library_init`, a marker GCC 13 headers reference but nothing calls (no relocation).
 * This rewrites the ELF's dynamic symbol table in a copy: the two calls bind to plain
 * strtol@GLIBC_2.2.5 / strtoul@GLIBC_2.2.5, and the two version needs become weak. The copy is
 * renamed over the file, so pnpm's store (hard links) is left untouched.
 *
 * Run by `./dev setup`; does nothing when the addon already loads.
 */
import { readFileSync, renameSync, writeFileSync, realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { spawnSync } from 'node:child_process';
import path from 'node:path';

const VER_FLG_WEAK = 2;
/** Version needs with nothing left bound to them once the C23 calls are redirected. */
const WEAKEN = new Set(['GLIBC_2.38', 'GLIBCXX_3.4.32']);

export function addonPath(root: string): string {
  const core = realpathSync(path.join(root, 'node_modules/@jazzer.js/core/package.json'));
  const fuzzerMain = createRequire(core).resolve('@jazzer.js/fuzzer');
  return path.join(path.dirname(fuzzerMain), '..', 'prebuilds', `fuzzer-${process.platform}-${process.arch}.node`);
}

/** '' when the addon loads in a fresh process, else the loader's error. */
export function loadError(file: string): string {
  const r = spawnSync(process.execPath, ['-e', 'process.dlopen({ exports: {} }, process.argv[1])', file], { encoding: 'utf8' });
  return r.status === 0 ? '' : (r.stderr.split('\n').find((l) => l.startsWith('Error')) ?? r.stderr.trim());
}

interface Section { offset: number; size: number }

/** Returns the number of symbols redirected. Throws on anything that is not the expected ELF64 layout. */
export function patchAddon(file: string): number {
  const b = readFileSync(file);
  if (b.readUInt32BE(0) !== 0x7f454c46 || b[4] !== 2 || b[5] !== 1) throw new Error(`${file}: not a little-endian ELF64 file`);
  const shoff = Number(b.readBigUInt64LE(0x28));
  const shentsize = b.readUInt16LE(0x3a), shnum = b.readUInt16LE(0x3c), shstrndx = b.readUInt16LE(0x3e);
  const header = (i: number): Section & { name: number } => {
    const o = shoff + i * shentsize;
    return { name: b.readUInt32LE(o), offset: Number(b.readBigUInt64LE(o + 24)), size: Number(b.readBigUInt64LE(o + 32)) };
  };
  const cstr = (off: number): string => b.toString('latin1', off, b.indexOf(0, off));
  const names = header(shstrndx);
  const sections = new Map<string, Section>();
  for (let i = 0; i < shnum; i++) { const s = header(i); sections.set(cstr(names.offset + s.name), s); }
  const need = (n: string): Section => { const s = sections.get(n); if (!s) throw new Error(`${file}: no ${n} section`); return s; };
  const dynsym = need('.dynsym'), dynstr = need('.dynstr'), versym = need('.gnu.version'), verneed = need('.gnu.version_r');

  // Elf64_Verneed { u16 version, u16 cnt, u32 file, u32 aux, u32 next }; Elf64_Vernaux { u32 hash, u16 flags, u16 other, u32 name, u32 next }.
  const aux: Array<{ at: number; name: string; index: number }> = [];
  for (let o = verneed.offset; ;) {
    const count = b.readUInt16LE(o + 2), first = b.readUInt32LE(o + 8), next = b.readUInt32LE(o + 12);
    for (let a = o + first, k = 0; k < count; k++) {
      aux.push({ at: a, name: cstr(dynstr.offset + b.readUInt32LE(a + 8)), index: b.readUInt16LE(a + 6) });
      const step = b.readUInt32LE(a + 12);
      if (!step) break;
      a += step;
    }
    if (!next) break;
    o += next;
  }
  const base = aux.find((x) => x.name === 'GLIBC_2.2.5');
  if (!base) throw new Error(`${file}: no GLIBC_2.2.5 version need`);
  let redirected = 0;
  // Elf64_Sym { u32 name, u8 info, u8 other, u16 shndx, u64 value, u64 size }.
  for (let i = 0; i < dynsym.size / 24; i++) {
    const at = dynsym.offset + i * 24;
    const nameOff = b.readUInt32LE(at);
    if (!cstr(dynstr.offset + nameOff).startsWith('__isoc23_')) continue;
    b.writeUInt32LE(nameOff + '__isoc23_'.length, at); // "__isoc23_strtol" → its own tail "strtol"
    b.writeUInt16LE(base.index, versym.offset + i * 2);
    redirected++;
  }
  for (const x of aux) if (WEAKEN.has(x.name)) b.writeUInt16LE(b.readUInt16LE(x.at + 4) | VER_FLG_WEAK, x.at + 4);
  const tmp = `${file}.skua-tmp`;
  writeFileSync(tmp, b, { mode: 0o755 });
  renameSync(tmp, file);
  return redirected;
}

if (import.meta.main) {
  const root = path.resolve(import.meta.dirname, '..', '..');
  const file = addonPath(root);
  const before = loadError(file);
  if (!before) process.exit(0);
  if (!/GLIBC_2\.38|GLIBCXX_3\.4\.32/.test(before)) {
    process.stderr.write(`fuzz: the libFuzzer addon does not load, and not for a known reason: ${before}\n`);
    process.exit(1);
  }
  const n = patchAddon(file);
  const after = loadError(file);
  if (after) { process.stderr.write(`fuzz: patched ${n} symbols but the addon still does not load: ${after}\n`); process.exit(1); }
  process.stdout.write(`fuzz: made the libFuzzer addon load on this glibc (${n} C23 symbols redirected)\n`);
}
