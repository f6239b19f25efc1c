# Reference values for textsim's ROUGE-1 and BLEU tests (src/lexical.rs).
# python3 -m pip install rouge-score==0.1.2 nltk==3.10.4 && python3 lexical.py
# Prints the pairs' ROUGE-1 F1 and BLEU as Rust literals (repr of the float).
from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu
from rouge_score import rouge_scorer

PAIRS = [  # (candidate, reference): keep in step with PAIRS in src/lexical.rs
    ("the cat sat on the mat", "the cat is on the mat"),
    ("", ""),
    ("", "the reference only"),
    ("the candidate only", ""),
    ("Hello, world!", "hello world"),
    ("the the the the the the the", "the cat is on the mat"),
    ("apples and oranges", "completely different text here"),
    ("Returns the current weather for a given city.",
     "Get the weather forecast of a city, in Celsius."),
    ("Computes the factorial of a non-negative integer n.",
     "Computes the factorial of a non-negative integer n."),
    ("add two numbers", "adds two numbers together"),
    ("Café über naïve İstanbul KELVIN\u212a x_y x-y 3.14",
     "cafe uber naive istanbul kelvink x y 3 14"),
    ("a\x1cb\xa0c\td\ne", "a b c d e"),
    ("Search the catalogue by keyword; returns up to `limit` items (default 10).",
     "Look up products matching a keyword and return at most limit results, default 10."),
]

scorer = rouge_scorer.RougeScorer(["rouge1"], use_stemmer=False)
smooth = SmoothingFunction().method1
print("ROUGE1:")
for cand, ref in PAIRS:
    print(f"    {float(scorer.score(ref, cand)['rouge1'].fmeasure)!r},")
print("BLEU:")
for cand, ref in PAIRS:
    b = sentence_bleu([ref.split()], cand.split(), smoothing_function=smooth)
    print(f"    {float(b)!r},")
