"""The seeded product catalogue of the synthetic APeB logs.

Every category has a handful of brands, a price range split into three bands
and a pool of attributes; each product carries one brand and two attributes.
The (brand, attributes, band) combination is unique inside a category, so a
user's latent preference picks out exactly one best product.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from perseval.benchmarks.apeb.catalog import Catalog, Product

BANDS = ("budget", "mid-range", "premium")


@dataclass(frozen=True)
class CategorySpec:
    key: str
    noun: str
    brands: tuple[str, ...]
    attributes: tuple[str, ...]
    price_range: tuple[float, float]
    vague: tuple[str, ...]  # early, underspecified ways a shopper starts a search


CATEGORIES: tuple[CategorySpec, ...] = (
    CategorySpec("running_shoes", "running shoes", ("Strideon", "Paceline", "Nimbo", "Trackwell", "Vaulta"),
                 ("lightweight", "cushioned", "waterproof", "wide-fit", "breathable", "trail-grip"), (40, 180),
                 ("new shoes for jogging", "something for my morning runs", "comfortable sport shoes")),
    CategorySpec("headphones", "headphones", ("Sonora", "Echobay", "Quietry", "Bassline", "Auralis"),
                 ("noise-cancelling", "wireless", "over-ear", "in-ear", "long-battery", "bass-boost"), (20, 350),
                 ("something to listen to music", "audio for the commute", "good sound for calls")),
    CategorySpec("moisturiser", "face moisturiser", ("Dermalune", "Purelle", "Hydrava", "Calmskin", "Velora"),
                 ("fragrance-free", "spf-30", "oil-free", "hydrating", "sensitive-skin", "matte-finish"), (8, 70),
                 ("my skin feels dry", "daily face cream", "skincare for winter")),
    CategorySpec("coffee", "coffee beans", ("Beanwise", "Kaffio", "Roastnine", "Embermorn", "Highcup"),
                 ("dark-roast", "light-roast", "single-origin", "decaf", "organic", "espresso-blend"), (8, 40),
                 ("coffee for home", "something to wake me up", "a gift for a coffee lover")),
    CategorySpec("backpacks", "backpack", ("Trailpack", "Urbanix", "Carryall", "Nomadi", "Packwell"),
                 ("laptop-sleeve", "waterproof", "lightweight", "anti-theft", "30-litre", "roll-top"), (25, 200),
                 ("bag for work", "something to carry my stuff", "travel bag")),
    CategorySpec("phone_cases", "phone case", ("Shieldo", "Casewise", "Armorly", "Clearo", "Gripton"),
                 ("shockproof", "slim", "transparent", "magnetic", "leather", "kickstand"), (8, 60),
                 ("protect my phone", "new phone cover", "phone accessories")),
    CategorySpec("snacks", "snack box", ("Munchly", "Crunchco", "Nibbla", "Fitbite", "Snackhaus"),
                 ("high-protein", "gluten-free", "low-sugar", "vegan", "spicy", "nut-free"), (5, 40),
                 ("snacks for the office", "something to eat after the gym", "healthy treats")),
    CategorySpec("cookware", "frying pan", ("Panora", "Ironhearth", "Cookwell", "Sizzla", "Chefline"),
                 ("non-stick", "cast-iron", "induction-ready", "ceramic", "28cm", "oven-safe"), (15, 150),
                 ("pan for eggs", "kitchen upgrade", "cooking at home")),
    CategorySpec("leggings", "yoga leggings", ("Flexa", "Zenfit", "Motiva", "Lunara", "Stretchy"),
                 ("high-waist", "squat-proof", "pocketed", "seamless", "cropped", "fleece-lined"), (15, 110),
                 ("clothes for yoga", "workout outfit", "comfy pants")),
    CategorySpec("desk_lamps", "desk lamp", ("Lumio", "Brightwell", "Glowdesk", "Lampora", "Halox"),
                 ("dimmable", "usb-charging", "warm-light", "clamp-mount", "app-control", "eye-care"), (15, 120),
                 ("light for studying", "my desk is too dark", "home office setup")),
    CategorySpec("water_bottles", "water bottle", ("Hydroflo", "Sipwell", "Aquara", "Bottlo", "Chillcan"),
                 ("insulated", "bpa-free", "1-litre", "straw-lid", "leakproof", "glass"), (8, 60),
                 ("drink more water", "bottle for the gym", "keep drinks cold")),
    CategorySpec("smartwatches", "smartwatch", ("Tickr", "Pulsar One", "Wristo", "Chronix", "Fitora"),
                 ("gps", "heart-rate", "long-battery", "swim-proof", "amoled", "sleep-tracking"), (40, 400),
                 ("track my fitness", "a watch for sport", "something to count steps")),
)

CATEGORY_BY_KEY = {c.key: c for c in CATEGORIES}


def price_band(spec: CategorySpec, price: float) -> str:
    lo, hi = spec.price_range
    third = (hi - lo) / 3
    return BANDS[min(2, int((price - lo) // third))]


def _product(spec: CategorySpec, rng: random.Random, pid: str, seen: set) -> Product:
    while True:
        brand = rng.choice(spec.brands)
        attrs = tuple(sorted(rng.sample(spec.attributes, 2)))
        lo, hi = spec.price_range
        price = round(rng.uniform(lo, hi - 1)) + 0.99
        band = price_band(spec, price)
        if (brand, attrs, band) not in seen:
            seen.add((brand, attrs, band))
            break
    words = " ".join(a.replace("-", " ").title() for a in attrs)
    model = f"{rng.choice('ABCDEFGHJKLMNPRSTVXZ')}{rng.randint(1, 9)}"
    return Product(pid, f"{brand} {words} {spec.noun.title()} {model}", spec.key, price, brand, attrs)


def band_of(product: Product) -> str:
    return price_band(CATEGORY_BY_KEY[product.category], product.price)


MAX_PER_CATEGORY = 150  # of the 225 (brand, attribute pair, band) combinations, so sampling stays quick


def build_catalog(seed: int, per_category: int = 40) -> Catalog:
    """`per_category` products in each category, ids p00000.. in category order."""
    if not 1 <= per_category <= MAX_PER_CATEGORY:
        raise ValueError(f"per_category must be 1..{MAX_PER_CATEGORY}, got {per_category}")
    rng = random.Random(f"{seed}:catalog")
    products: list[Product] = []
    for spec in CATEGORIES:
        seen: set = set()
        for _ in range(per_category):
            products.append(_product(spec, rng, f"p{len(products):05d}", seen))
    return Catalog(products)
