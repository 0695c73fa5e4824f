"""The agreement table of docs/TESTING.md: per op, the worst relative difference from PyTorch
over the cases the runner of tests/ops_torch_util.h compared (the rows it appends to the file
TAPEGRAD_AGREEMENT_CSV names: op, float64 forward, gradient, second derivative, float32 forward).

    rm -f /tmp/agreement.csv
    TAPEGRAD_AGREEMENT_CSV=/tmp/agreement.csv ctest --preset release \
        -R 'OpListTorch|OpsTorch.ConvPool|OpsTorch.Reductions'
    python3 tests/agreement_table.py /tmp/agreement.csv
"""

import csv
import sys


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: agreement_table.py AGREEMENT.csv")
    worst = {}
    with open(sys.argv[1], newline="") as f:
        for row in csv.reader(f):
            op, values = row[0], [float(v) for v in row[1:5]]
            count, best = worst.get(op, (0, [0.0] * 4))
            worst[op] = (count + 1, [max(a, b) for a, b in zip(best, values)])
    print("| op | cases | forward (f64) | gradient | second derivative | forward (f32) |")
    print("|---|---:|---:|---:|---:|---:|")
    for op in sorted(worst):
        count, w = worst[op]
        print("| `%s` | %d | %s |" % (op, count, " | ".join("%.1e" % v if v else "0" for v in w)))


if __name__ == "__main__":
    main()
