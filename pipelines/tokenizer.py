"""Stage `tokenizer`: the profile's tokenizer, shared by every pretraining run."""

from common import TOKENIZER, params, use_mirror

from peeval.train import build_tokenizer

if __name__ == "__main__":
    p = params()
    use_mirror()
    build_tokenizer(TOKENIZER, profile=p["profile"], **(p["tokenizer"].get("set") or {}))
    print(f"tokenizer: {TOKENIZER}")
