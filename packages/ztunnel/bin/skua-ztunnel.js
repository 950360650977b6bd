#!/usr/bin/env node
// skua-ztunnel: the per-node L4 proxy of Istio's ambient mode (see src/main.ts). Needs Node >= 24 (type stripping).
import '../src/main.ts';
