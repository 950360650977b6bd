import zlib from 'node:zlib';
import type { Transform } from 'node:stream';
import type { Msg } from '../../../config/fields.ts';
import { unwrapAny } from '../../../config/typed-config.ts';

/**
 * The compressor libraries (envoy.extensions.compression.{gzip,brotli,zstd}.compressor.v3), compiled
 * into node:zlib options once. Each makes a streaming compressor per response and compresses a
 * whole body at once for local replies.
 */
export interface CompressorLibrary {
  /** Content-Encoding token: gzip, br, zstd. */
  readonly encoding: string;
  /** Stat prefix under compressor.<name>.: gzip, brotli, zstd. */
  readonly statPrefix: string;
  create(): Transform;
  compressAll(body: Buffer): Buffer;
}

const PREFIX = 'type.googleapis.com/envoy.extensions.compression.';
const GZIP_LEVELS: Record<string, number> = {
  DEFAULT_COMPRESSION: zlib.constants.Z_DEFAULT_COMPRESSION, BEST_SPEED: 1, BEST_COMPRESSION: 9,
  COMPRESSION_LEVEL_1: 1, COMPRESSION_LEVEL_2: 2, COMPRESSION_LEVEL_3: 3, COMPRESSION_LEVEL_4: 4, COMPRESSION_LEVEL_5: 5,
  COMPRESSION_LEVEL_6: 6, COMPRESSION_LEVEL_7: 7, COMPRESSION_LEVEL_8: 8, COMPRESSION_LEVEL_9: 9,
};
const GZIP_STRATEGIES: Record<string, number> = {
  DEFAULT_STRATEGY: zlib.constants.Z_DEFAULT_STRATEGY, FILTERED: zlib.constants.Z_FILTERED, HUFFMAN_ONLY: zlib.constants.Z_HUFFMAN_ONLY,
  RLE: zlib.constants.Z_RLE, FIXED: zlib.constants.Z_FIXED,
};
const BROTLI_MODES: Record<string, number> = {
  DEFAULT: zlib.constants.BROTLI_MODE_GENERIC, GENERIC: zlib.constants.BROTLI_MODE_GENERIC,
  TEXT: zlib.constants.BROTLI_MODE_TEXT, FONT: zlib.constants.BROTLI_MODE_FONT,
};

function range(m: Msg, key: string, fallback: number, lo: number, hi: number): number {
  const v = m.num(key, fallback);
  if (!Number.isInteger(v) || v < lo || v > hi) throw m.error(key, `must be an integer in [${lo}, ${hi}], got ${v}`);
  return v;
}

function chunkSize(m: Msg): number {
  return range(m, 'chunk_size', 4096, 4096, 65536);
}

export function compileLibrary(lib: Msg): CompressorLibrary {
  const typed = unwrapAny(lib.requiredMsg('typed_config'));
  const m = typed.msg;
  const own = typed.wrapper ? [] : ['@type'];
  switch (typed.url) {
    case `${PREFIX}gzip.compressor.v3.Gzip`: {
      m.onlyFields([...own, 'memory_level', 'compression_level', 'compression_strategy', 'window_bits', 'chunk_size']);
      const opts: zlib.ZlibOptions = {
        memLevel: range(m, 'memory_level', 5, 1, 9),
        level: GZIP_LEVELS[m.enumOf('compression_level', Object.keys(GZIP_LEVELS))],
        strategy: GZIP_STRATEGIES[m.enumOf('compression_strategy', Object.keys(GZIP_STRATEGIES))],
        windowBits: range(m, 'window_bits', 12, 9, 15),
        chunkSize: chunkSize(m),
      };
      return { encoding: 'gzip', statPrefix: 'gzip', create: () => zlib.createGzip(opts), compressAll: (b) => zlib.gzipSync(b, opts) };
    }
    case `${PREFIX}brotli.compressor.v3.Brotli`: {
      m.onlyFields([...own, 'quality', 'encoder_mode', 'window_bits', 'input_block_bits', 'chunk_size', 'disable_literal_context_modeling']);
      const params: Record<number, number> = {
        [zlib.constants.BROTLI_PARAM_QUALITY]: range(m, 'quality', 3, 0, 11),
        [zlib.constants.BROTLI_PARAM_MODE]: BROTLI_MODES[m.enumOf('encoder_mode', Object.keys(BROTLI_MODES))],
        [zlib.constants.BROTLI_PARAM_LGWIN]: range(m, 'window_bits', 18, 10, 24),
        [zlib.constants.BROTLI_PARAM_LGBLOCK]: range(m, 'input_block_bits', 24, 16, 24),
        [zlib.constants.BROTLI_PARAM_DISABLE_LITERAL_CONTEXT_MODELING]: m.bool('disable_literal_context_modeling') ? 1 : 0,
      };
      const opts: zlib.BrotliOptions = { params, chunkSize: chunkSize(m) };
      return { encoding: 'br', statPrefix: 'brotli', create: () => zlib.createBrotliCompress(opts), compressAll: (b) => zlib.brotliCompressSync(b, opts) };
    }
    case `${PREFIX}zstd.compressor.v3.Zstd`: {
      m.onlyFields([...own, 'compression_level', 'enable_checksum', 'strategy', 'dictionary', 'chunk_size']);
      if (m.has('dictionary')) throw m.error('dictionary', 'is not supported');
      const params: Record<number, number> = {
        [zlib.constants.ZSTD_c_compressionLevel]: range(m, 'compression_level', 3, 1, 22),
        [zlib.constants.ZSTD_c_checksumFlag]: m.bool('enable_checksum') ? 1 : 0,
      };
      const strategy = m.enumOf('strategy', ['default', 'fast', 'dfast', 'greedy', 'lazy', 'lazy2', 'btlazy2', 'btopt', 'btultra', 'btultra2']);
      if (strategy !== 'default') params[zlib.constants.ZSTD_c_strategy] = ['fast', 'dfast', 'greedy', 'lazy', 'lazy2', 'btlazy2', 'btopt', 'btultra', 'btultra2'].indexOf(strategy) + 1;
      const opts = { params, chunkSize: chunkSize(m) } as zlib.ZstdOptions;
      return { encoding: 'zstd', statPrefix: 'zstd', create: () => zlib.createZstdCompress(opts), compressAll: (b) => zlib.zstdCompressSync(b, opts) };
    }
  }
  throw lib.error('typed_config', `unsupported compressor library ${typed.url || '(none)'}`);
}
