"""Keras (tf_keras) encoders of our own, built from a Hugging Face checkpoint's config.json and loaded from its
model.safetensors in PyTorch names, with no transformers model class: every encoder on the Hub, not only the
families transformers once ported to TensorFlow (it dropped TensorFlow in v5).

One module per architecture (bert_family.py, deberta_v2.py, modernbert.py, gte.py, eurobert.py, jina_v3.py,
nomic_bert.py, ultrabert.py), each keeping family.py's contract; classifier.py is the one interface the rest of the
project uses (build, load, export in PyTorch names); from_folder.py reads a model folder once.
"""
