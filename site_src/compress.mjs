// Build step (run by build.py with Node): write a Brotli copy (quality 11) of
// each file named on the command line: node compress.mjs SRC DST [SRC DST …].
// Node's zlib has Brotli built in, so the build needs no Python package for it.
import {readFileSync, writeFileSync} from "node:fs";
import {brotliCompressSync, constants} from "node:zlib";

const args = process.argv.slice(2);
for (let i = 0; i + 1 < args.length; i += 2) {
  const data = readFileSync(args[i]);
  writeFileSync(args[i + 1], brotliCompressSync(data, {params: {
    [constants.BROTLI_PARAM_QUALITY]: 11, [constants.BROTLI_PARAM_SIZE_HINT]: data.length}}));
}
