"""Print the peer tokenizers' output as JSON lines (run under .venv-peers).

Input: a JSONL file of {"id", "text"}. Output per document: {"id", "spacy": [...], "treebank": [...],
"sentences": [...]} where "spacy" is datatrove 0.10's English word split (spaCy blank("en"), tokens
stripped, empty ones dropped), "treebank" is NLTK's NLTKWordTokenizer on the text as one sentence
(Punkt's model is not installed), and "sentences" is spaCy's sentencizer count for each stripped
non-empty line, as datatrove's C4 filter counts them.
"""

import json
import sys

import spacy
from nltk.tokenize import NLTKWordTokenizer


def main():
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    tb = NLTKWordTokenizer()
    for line in open(sys.argv[1], encoding="utf-8"):
        d = json.loads(line)
        text = d["text"]
        words = [t.text.strip() for t in nlp.make_doc(text) if t.text.strip()]
        sents = [len(list(nlp(x.strip()).sents)) for x in text.splitlines() if x.strip()]
        print(json.dumps({"id": d["id"], "spacy": words, "treebank": tb.tokenize(text), "sentences": sents}))


if __name__ == "__main__":
    main()
