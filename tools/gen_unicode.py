#!/usr/bin/env python3
"""Generate src/tokenizer/unicode_data.c: the code point class table the tokenizer's
pre-tokenizer needs (letter / number / mark / punctuation / symbol / separator / control /
unassigned, plus the White_Space property).

Usage:
    tools/gen_unicode.py [--npm-unicode DIR] > src/tokenizer/unicode_data.c

Source of the data:
  * default: Python's own unicodedata module (its Unicode version is printed in the output).
  * --npm-unicode DIR: an unpacked @unicode/unicode-X.Y.Z npm package (read through node), for a
    Unicode version newer than this Python's. llama.cpp's tables are Unicode 15.1, so the committed
    file is generated from @unicode/unicode-15.1.0 to agree with it on every code point:
        npm pack @unicode/unicode-15.1.0 && tar xzf unicode-unicode-15.1.0-*.tgz
        tools/gen_unicode.py --npm-unicode package > src/tokenizer/unicode_data.c

Layout of the output: a two-stage table. stage1[cp >> 8] names a 256-entry block of stage2;
identical blocks are stored once. Each entry is one byte: bits 0-2 the class
(enum strata_ucat in src/tokenizer/unicode.h), bit 3 White_Space.
"""
import argparse
import json
import os
import subprocess
import sys
import unicodedata

MAX_CP = 0x110000
BLOCK = 256

# enum strata_ucat, in the order of src/tokenizer/unicode.h
UCAT_UNASSIGNED, UCAT_LETTER, UCAT_NUMBER, UCAT_MARK, UCAT_PUNCT, UCAT_SYMBOL, UCAT_SEPARATOR, \
    UCAT_CONTROL = range(8)
WHITESPACE_BIT = 0x08

# General_Category major class -> our class. "Cn" (unassigned) is handled separately.
MAJOR = {"L": UCAT_LETTER, "N": UCAT_NUMBER, "M": UCAT_MARK, "P": UCAT_PUNCT, "S": UCAT_SYMBOL,
         "Z": UCAT_SEPARATOR, "C": UCAT_CONTROL}

# Two-letter category -> the folder name the npm package uses.
NPM_CATEGORY_DIRS = {
    "Lu": "Uppercase_Letter", "Ll": "Lowercase_Letter", "Lt": "Titlecase_Letter",
    "Lm": "Modifier_Letter", "Lo": "Other_Letter", "Mn": "Nonspacing_Mark",
    "Mc": "Spacing_Mark", "Me": "Enclosing_Mark", "Nd": "Decimal_Number", "Nl": "Letter_Number",
    "No": "Other_Number", "Pc": "Connector_Punctuation", "Pd": "Dash_Punctuation",
    "Ps": "Open_Punctuation", "Pe": "Close_Punctuation", "Pi": "Initial_Punctuation",
    "Pf": "Final_Punctuation", "Po": "Other_Punctuation", "Sm": "Math_Symbol",
    "Sc": "Currency_Symbol", "Sk": "Modifier_Symbol", "So": "Other_Symbol",
    "Zs": "Space_Separator", "Zl": "Line_Separator", "Zp": "Paragraph_Separator",
    "Cc": "Control", "Cf": "Format", "Cs": "Surrogate", "Co": "Private_Use",
}


def classes_from_python():
    cls = bytearray(MAX_CP)
    for cp in range(MAX_CP):
        cat = unicodedata.category(chr(cp))
        cls[cp] = UCAT_UNASSIGNED if cat == "Cn" else MAJOR[cat[0]]
        # White_Space (PropList.txt). str.isspace() also accepts U+001C..U+001F because their
        # bidi class is B/S, but they are not White_Space, and regex \s engines agree with that.
        if chr(cp).isspace() and not 0x1C <= cp <= 0x1F:
            cls[cp] |= WHITESPACE_BIT
    return cls, "Python %s unicodedata" % sys.version.split()[0], unicodedata.unidata_version


def classes_from_npm(pkg_dir):
    pkg_dir = os.path.abspath(pkg_dir)
    with open(os.path.join(pkg_dir, "package.json"), encoding="utf-8") as f:
        pkg = json.load(f)
    version = pkg["name"].rsplit("-", 1)[-1]
    paths = {cat: os.path.join(pkg_dir, "General_Category", d, "code-points.mjs")
             for cat, d in NPM_CATEGORY_DIRS.items()}
    paths["WS"] = os.path.join(pkg_dir, "Binary_Property", "White_Space", "code-points.mjs")
    script = ("const paths = JSON.parse(process.argv[1]); const out = {};"
              "for (const [k, p] of Object.entries(paths)) out[k] = (await import(p)).default;"
              "process.stdout.write(JSON.stringify(out));")
    res = subprocess.run(["node", "--input-type=module", "-e", script, json.dumps(paths)],
                         check=True, capture_output=True, text=True)
    data = json.loads(res.stdout)
    cls = bytearray(MAX_CP)  # unassigned unless listed
    for cat in NPM_CATEGORY_DIRS:
        for cp in data[cat]:
            cls[cp] = MAJOR[cat[0]]
    for cp in data["WS"]:
        cls[cp] |= WHITESPACE_BIT
    return cls, "npm %s %s" % (pkg["name"], pkg["version"]), version


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--npm-unicode", metavar="DIR",
                    help="unpacked @unicode/unicode-X.Y.Z package to read instead of unicodedata")
    args = ap.parse_args()
    if args.npm_unicode:
        cls, source, version = classes_from_npm(args.npm_unicode)
    else:
        cls, source, version = classes_from_python()

    blocks, index, stage1 = [], {}, []
    for b in range(MAX_CP // BLOCK):
        blk = bytes(cls[b * BLOCK:(b + 1) * BLOCK])
        if blk not in index:
            index[blk] = len(blocks)
            blocks.append(blk)
        stage1.append(index[blk])
    assert len(blocks) < 65536

    out = []
    out.append("// Code point classes for the tokenizer's pre-tokenizer: Unicode %s." % version)
    out.append("// GENERATED by tools/gen_unicode.py from %s; do not edit." % source)
    out.append("// Layout: see src/tokenizer/unicode.h (two-stage table, %d unique blocks of %d)."
               % (len(blocks), BLOCK))
    out.append('#include "tokenizer/unicode.h"')
    out.append("")
    out.append('const char strata_ucd_version[] = "%s";' % version)
    out.append("")
    out.append("const uint16_t strata_ucd_stage1[%d] = {" % len(stage1))
    for i in range(0, len(stage1), 16):
        out.append("    " + ", ".join("%d" % v for v in stage1[i:i + 16]) + ",")
    out.append("};")
    out.append("")
    out.append("const uint8_t strata_ucd_stage2[%d][%d] = {" % (len(blocks), BLOCK))
    for blk in blocks:
        out.append("    {")
        for i in range(0, BLOCK, 32):
            out.append("        " + ",".join("%d" % v for v in blk[i:i + 32]) + ",")
        out.append("    },")
    out.append("};")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
