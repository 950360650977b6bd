// The Go-built peers (h2spec, grpc-go's interop client and server, the compose-spec loader): `./dev setup` builds them into
// .tools/bin (scripts/go-tools.sh); a test run without that set-up builds them on first use.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from './proxy.ts';
import { run } from './client.ts';

export type GoTool = 'h2spec' | 'grpc-interop-client' | 'grpc-interop-server' | 'compose-go';

/** The tool's path, or why it is not available (the test then skips with that reason). */
export async function goTool(name: GoTool): Promise<{ path: string } | { skip: string }> {
  const bin = path.join(repoRoot, '.tools', 'bin', name);
  if (!existsSync(bin)) {
    const r = await run(path.join(repoRoot, 'scripts', 'go-tools.sh'), [], 600_000);
    if (r.code !== 0) throw new Error(`scripts/go-tools.sh failed (${r.code}): ${r.stderr.slice(-2000)}`);
    if (!existsSync(bin)) return { skip: r.stderr.trim() || `${name} is not installed` };
  }
  return { path: bin };
}
