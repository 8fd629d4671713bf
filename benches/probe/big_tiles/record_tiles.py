#!/usr/bin/env python3
"""What the records the model learns from say of large thread tiles: over the plain f32
GEMMs (not TF32) of a database (one reduction block of three indexed buffers, as a GEMM's canonical
text reads) with cached features (benches/shipped_db.sh builds one), the share of their
measured records that compute more than 64 outputs a thread (`log_local_elements_per_thread`,
feature 7), and per GEMM the speed of the fastest such record over the fastest of all. No
device.

    python3 benches/probe/big_tiles/record_tiles.py BASE
"""
import collections
import sqlite3
import struct
import sys

LOCAL_ELEMENTS = 7  # index of log_local_elements_per_thread in FEATURE_NAMES


def plain_f32_gemm(text):
    body = [line for line in text.splitlines()[1:] if not line.startswith("input")]
    return (len(body) == 1 and "sum(" in body[0] and body[0].count("[") == 3
            and "f32" in text and "f16" not in text and "tf32" not in text)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    db = sqlite3.connect(sys.argv[1])
    texts = dict(db.execute("select key, canonical_text from workloads"))
    records = collections.defaultdict(list)
    for key, secs, blob in db.execute(
            "select r.workload_key, r.median_secs, f.features from records r"
            " join record_features f on f.record_id = r.id join targets t on t.id = r.target_id"
            " where r.status = 'ok' and t.kind = 'cuda'"):
        if plain_f32_gemm(texts[key]):
            features = struct.unpack(f"{len(blob) // 4}f", blob)
            records[key].append((secs, 2 ** features[LOCAL_ELEMENTS]))
    shares, ratios = [], []
    for recs in records.values():
        big = [secs for secs, outputs in recs if outputs > 64]
        shares.append(len(big) / len(recs))
        if big:
            ratios.append(min(secs for secs, _ in recs) / min(big))
    ratios.sort()
    quartiles = [round(ratios[int(q * (len(ratios) - 1))], 3) for q in (0, 0.25, 0.5, 0.75, 1)]
    print(f"{len(records)} plain f32 GEMMs; records of more than 64 outputs a thread: "
          f"{sum(shares) / len(shares):.1%} on average")
    print(f"fastest such record's speed over the fastest record's, quartiles over {len(ratios)}"
          f" GEMMs: {quartiles}; the fastest of all on {sum(r >= 0.999 for r in ratios)}")


if __name__ == "__main__":
    main()
