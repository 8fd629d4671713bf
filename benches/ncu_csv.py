"""Reading Nsight Compute's `--csv` output for the bench scripts (kernel_times.sh,
stall_reasons.sh): the profiled launches grouped by kernel and launch shape."""
import collections
import csv
import io


def kernels(path, name_width=60):
    """`{(kernel name, grid, block): [metrics of each launch]}` in launch order, or None
    (after printing ncu's last words) where the file holds no profile."""
    text = open(path).read()
    start = text.find('"ID"')
    print("==", path)
    if start < 0:
        print("  no profile:", text[-300:])
        return None
    launches = collections.OrderedDict()
    for r in csv.DictReader(io.StringIO(text[start:])):
        launches.setdefault((r["Kernel Name"], r["ID"]), {})[r["Metric Name"]] = r["Metric Value"]
    shapes = collections.OrderedDict()
    for (name, _), m in launches.items():
        key = (name[:name_width], m.get("launch__grid_size"), m.get("launch__block_size"))
        shapes.setdefault(key, []).append(m)
    return shapes


def number(value):
    """A metric's value as ncu prints it (thousands separated by commas)."""
    return float(value.replace(",", ""))
