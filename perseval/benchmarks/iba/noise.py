"""Task-irrelevant chat turns that bury the preference evidence.

Templates are combined with several fillers so histories do not repeat one
sentence hundreds of times; topics avoid the preference vocabulary of the
scenarios (food, trains, clinics, writing style, schedules) so that a noise
turn never counts as evidence by accident.
"""
from __future__ import annotations

import random

from perseval.benchmarks.iba.personas import Persona

# (user question, assistant answer, {placeholder: fillers})
_TEMPLATES: tuple[tuple[str, str, dict[str, tuple[str, ...]]], ...] = (
    ("Why are the leaves of my {plant} turning yellow?",
     "Overwatering is the usual cause; let the soil dry a little between waterings and check the pot drains.",
     {"plant": ("basil", "monstera", "fern", "tomato plant", "orchid", "lemon tree")}),
    ("How often should I brush my {pet}?",
     "A few times a week is typical; more often during shedding season.",
     {"pet": ("cat", "golden retriever", "rabbit", "husky", "guinea pig")}),
    ("Who directed {film}?",
     "That one is usually credited to a single director; I can list their other films if you like.",
     {"film": ("Spirited Away", "Alien", "Amelie", "Parasite", "The Third Man", "Vertigo")}),
    ("What is the easiest way to see {planet} tonight?",
     "Look low on the horizon after sunset; binoculars help, and a dark spot away from streetlights is best.",
     {"planet": ("Jupiter", "Saturn", "Venus", "Mars", "the Orion Nebula")}),
    ("How do I fix a {fault}?",
     "Look for the worn or loose part first; most of the time a screw, a dab of glue or a shim fixes it.",
     {"fault": ("squeaky door hinge", "loose cabinet handle", "sticking drawer", "wobbly chair leg", "cracked tile")}),
    ("What are the basic rules of {game}?",
     "Players take turns; the goal and scoring differ, but a first game usually takes under an hour.",
     {"game": ("Go", "backgammon", "Carcassonne", "mahjong", "cribbage", "Catan")}),
    ("What does the word '{word}' originally come from?",
     "It entered English through older borrowings; the root meaning was quite different.",
     {"word": ("salary", "quarantine", "muscle", "disaster", "clue", "nice")}),
    ("Can you recommend a {genre} album to get into?",
     "Start with a well-known classic of the genre, then branch out to artists it influenced.",
     {"genre": ("jazz", "bossa nova", "post-rock", "baroque", "afrobeat", "shoegaze")}),
    ("When did {event} happen?",
     "It is usually dated to a specific year, though historians debate the details.",
     {"event": ("the fall of Constantinople", "the first Moon landing", "the printing press's invention",
                "the Meiji Restoration", "the founding of Rome")}),
    ("What's a neat trick for solving {puzzle}?",
     "Work from the most constrained part first; it narrows the options quickly.",
     {"puzzle": ("sudoku", "nonograms", "a Rubik's cube", "kakuro", "cryptic crosswords")}),
    ("Will it {weather} this weekend where I live?",
     "I can't see live forecasts, but your local weather service will have an hourly outlook.",
     {"weather": ("rain", "snow", "be windy", "be sunny", "get foggy")}),
    ("How do I get sharper photos of {subject}?",
     "Use a faster shutter speed, brace the camera, and focus on the nearest eye or edge.",
     {"subject": ("birds", "my kids playing", "fireworks", "the moon", "waterfalls")}),
    ("What yarn weight is good for a {item}?",
     "Worsted weight is a forgiving choice for beginners; check the pattern's gauge.",
     {"item": ("scarf", "beanie", "blanket", "pair of mittens", "tote bag")}),
    ("Which bird is {description}?",
     "That sounds like a common garden species; a photo or recording would help pin it down.",
     {"description": ("small with a red breast", "black with a yellow beak", "blue with a crest",
                      "tiny and always hovering", "grey with a loud call")}),
    ("How do I check my car's {part}?",
     "Park on level ground, let the engine cool, and follow the marks in the owner's manual.",
     {"part": ("oil level", "tyre pressure", "coolant", "brake fluid", "wiper blades")}),
    ("Tell me a fun fact about {country}.",
     "It has a surprising record or two; for example, its longest place name is famously hard to say.",
     {"country": ("Iceland", "Chile", "Mongolia", "New Zealand", "Portugal", "Kenya")}),
    ("How do I convert {quantity}?",
     "Multiply by the conversion factor; I can do the arithmetic if you give me the number.",
     {"quantity": ("miles to kilometres", "Fahrenheit to Celsius", "pounds to kilograms",
                   "cups to millilitres", "acres to hectares")}),
    ("Any tips for learning {skill}?",
     "Short, regular practice beats long sessions; record yourself to spot mistakes.",
     {"skill": ("the ukulele", "touch typing", "juggling", "calligraphy", "chess openings")}),
    ("What's the difference between {pair}?",
     "They overlap, but they differ in scale and in how the terms are used; I can go into detail.",
     {"pair": ("a violin and a fiddle", "a crocodile and an alligator", "weather and climate",
               "a comet and an asteroid", "baking soda and baking powder")}),
    ("Why does {phenomenon}?",
     "It comes down to how light, heat or pressure behave at small scales; I can sketch the physics if you want.",
     {"phenomenon": ("the sky look blue", "ice float on water", "a rainbow form", "metal feel colder than wood",
                     "the moon change shape over a month")}),
    ("Is it true that {claim}?",
     "That's a popular belief, but the evidence points the other way; it's a common myth.",
     {"claim": ("goldfish have a three-second memory", "lightning never strikes the same place twice",
                "bats are blind", "bulls hate the colour red", "we only use ten percent of our brains")}),
    ("Can you explain how {mechanism} works?",
     "In short, a few simple parts interact in a clever sequence; a diagram makes it obvious.",
     {"mechanism": ("a zipper", "a pin tumbler lock", "a bicycle derailleur", "a compass", "a mechanical watch")}),
    ("What's a good name for a new {animal}?",
     "Short names with two syllables are easy to call; pick something that suits its personality.",
     {"animal": ("kitten", "puppy", "parrot", "tortoise", "hamster")}),
    ("How do I clean {thing}?",
     "A mild soap solution and a soft cloth work for most cases; test a hidden spot first.",
     {"thing": ("a suede jacket", "a cast-iron pan", "window blinds", "a keyboard", "white sneakers")}),
)
_ENDINGS = ("", " Just curious.", " Thanks!", " Asking for a friend.", " No rush.", " Quick question.")
_PERSONA_TEMPLATES = (
    ("Long day as {role}. What's a good stretch for a stiff neck?",
     "Try slow chin tucks and gentle side tilts, holding each for about twenty seconds."),
    ("I'm {state}. Any tip to unwind for ten minutes?",
     "A short walk or a few minutes of slow breathing can help more than scrolling."),
    ("As {background}, is it normal to feel tired after the weekend?",
     "Quite common; shifted sleep times on weekends are a frequent cause."),
    ("My friends say I'm {trait}. Is that a good thing?",
     "Most traits have upsides and downsides; it depends on the situation."),
)


# Rendered turns, keyed by the choices that made them: a full-size build has over a million
# noise turns drawn from a few thousand distinct texts, so sharing the strings saves memory.
_RENDERED: dict[tuple, str] = {}


def _persona_turn(t: int, persona: Persona, trait: str) -> str:
    key = ("persona", t, persona.persona_id, trait)
    text = _RENDERED.get(key)
    if text is None:
        q, a = _PERSONA_TEMPLATES[t]
        q = q.format(role=persona.role, state=persona.state, background=persona.background, trait=trait)
        text = _RENDERED[key] = f"User: {q}\nAssistant: {a}"
    return text


def _topic_turn(t: int, picks: tuple[int, ...], ending: int) -> str:
    key = (t, picks, ending)
    text = _RENDERED.get(key)
    if text is None:
        q, a, fillers = _TEMPLATES[t]
        q = q.format(**{k: v[i] for (k, v), i in zip(fillers.items(), picks)}) + _ENDINGS[ending]
        text = _RENDERED[key] = f"User: {q}\nAssistant: {a}"
    return text


def noise_turn(rng: random.Random, persona: Persona) -> str:
    """One task-irrelevant exchange; about one in eight mentions the persona for realism."""
    if rng.random() < 0.125:
        t = rng.randrange(len(_PERSONA_TEMPLATES))
        return _persona_turn(t, persona, rng.choice(persona.traits))
    t = rng.randrange(len(_TEMPLATES))
    picks = tuple(rng.randrange(len(v)) for v in _TEMPLATES[t][2].values())
    return _topic_turn(t, picks, rng.randrange(len(_ENDINGS)))
