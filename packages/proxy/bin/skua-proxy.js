#!/usr/bin/env node
// skua-proxy: Envoy-compatible command line (see src/main.ts). Needs Node >= 24 (type stripping).
import '../src/main.ts';
