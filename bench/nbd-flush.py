#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
# nbd-flush.py URI - connect to an NBD server, send one FLUSH and print how
# long the reply took, in seconds.  Prints "-" if the export cannot flush.
#
# Run with the system interpreter (/usr/bin/python3), which is where
# python3-libnbd installs the "nbd" module.
import sys
import time

import nbd


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: nbd-flush.py URI")
    h = nbd.NBD()
    h.connect_uri(sys.argv[1])
    if not h.can_flush():
        print("-")
    else:
        t0 = time.monotonic()
        h.flush()
        print(f"{time.monotonic() - t0:.3f}")
    h.shutdown()


if __name__ == "__main__":
    main()
