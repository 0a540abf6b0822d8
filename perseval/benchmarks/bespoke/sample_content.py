"""Hand-written material for the seeded sample: topics with atomic facts, personas, noise.

Facts are general knowledge written for this sample. Each topic lists
(aspect, claim) pairs: a user's gold need names some aspects, and the
matching claims become that query's gold information; the rest serve as
distractors in the local search corpus.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Topic:
    key: str
    task_type: str
    query: str
    search_query: str
    facets: tuple[tuple[str, str], ...]  # (aspect named in the gold need, atomic claim)


@dataclass(frozen=True)
class Persona:
    profession: str
    expertise: str  # novice | expert
    tone: str  # casual | formal
    style: str  # examples | steps | bullets | summary
    interests: tuple[str, ...]


TOPICS: tuple[Topic, ...] = (
    Topic("ev-prices", "analysis", "Why are electric cars getting cheaper?", "electric car price drop reasons", (
        ("battery costs", "Lithium-ion battery pack prices fell by roughly 90 percent between 2010 and 2023."),
        ("battery chemistry", "Lithium iron phosphate cells avoid cobalt and nickel, which lowers cell cost."),
        ("manufacturing scale", "Larger factory output spreads fixed costs over more vehicles."),
        ("price competition", "Competition among carmakers has pushed manufacturers to cut sticker prices."),
        ("incentives", "Purchase incentives and tax credits lower the price buyers actually pay."),
        ("used market", "A growing used electric car market offers cheaper entry points."),
        ("vehicle design", "Dedicated electric platforms need fewer parts than converted combustion designs."),
    )),
    Topic("remote-housing", "analysis", "How has remote work changed housing markets?", "remote work effect on house prices", (
        ("home offices", "Demand for homes with space for a home office rose after 2020."),
        ("moving out", "Some buyers left city centers for suburbs and smaller towns once commuting became optional."),
        ("office vacancy", "Downtown office vacancy rates increased in many large cities."),
        ("city rents", "Rents in some city centers dipped in 2020 and later recovered."),
        ("destination towns", "Popular remote-work destinations saw faster price growth and affordability pressure for locals."),
        ("hybrid work", "Hybrid schedules kept many workers within commuting distance of their offices."),
    )),
    Topic("social-news", "analysis", "How has social media changed the way people get news?", "social media news consumption study", (
        ("ranking algorithms", "Algorithmic feeds rank posts by predicted engagement rather than by publication time."),
        ("incidental exposure", "Many people now come across news while scrolling instead of seeking it out."),
        ("short video", "Short video platforms have become a news source for younger audiences."),
        ("misinformation", "False stories can spread faster than corrections because they are novel and emotional."),
        ("publisher revenue", "Traditional news outlets lost advertising revenue to large platforms."),
        ("context labels", "Platforms added fact-check labels and community notes to give posts context."),
    )),
    Topic("home-strength", "guidance", "How do I start strength training at home?", "beginner strength training at home plan", (
        ("no-equipment exercises", "Squats, push-ups and lunges build strength without any equipment."),
        ("weekly frequency", "Two to three full-body sessions a week are enough for beginners."),
        ("progression", "Progressive overload means gradually adding reps, sets or resistance over time."),
        ("warm-up", "A five to ten minute warm-up lowers the risk of injury."),
        ("recovery", "A muscle group needs about 48 hours of recovery before it is trained hard again."),
        ("cheap equipment", "Resistance bands are an inexpensive way to add load at home."),
        ("form", "Good form matters more than lifting heavy weights."),
    )),
    Topic("sourdough", "guidance", "How can I get my sourdough to rise better?", "sourdough not rising enough fix", (
        ("starter readiness", "A starter is ready when it roughly doubles within four to eight hours of feeding."),
        ("dough temperature", "Dough at about 24 to 26 degrees Celsius ferments faster than cooler dough."),
        ("bulk fermentation", "Bulk fermentation is usually done when the dough has grown by about half."),
        ("stretch and fold", "Sets of stretch-and-folds during bulk fermentation build gluten strength."),
        ("flour choice", "Higher-protein bread flour gives a stronger structure than all-purpose flour."),
        ("cold proof", "Proofing the shaped loaf in the fridge improves flavor and makes scoring easier."),
    )),
    Topic("career-interview", "guidance", "How should I prepare for a job interview in a new field?", "career change interview preparation tips", (
        ("company research", "Researching the company's products, customers and recent news helps before an interview."),
        ("STAR answers", "The STAR method structures answers as situation, task, action and result."),
        ("transferable skills", "Transferable skills from a previous field should be linked to the job description."),
        ("questions to ask", "Preparing two or three questions for the interviewer shows engagement."),
        ("practice", "Mock interviews reduce anxiety and reveal weak answers."),
        ("follow-up", "A short thank-you note after the interview is a common courtesy."),
    )),
    Topic("e-reader", "recommendation", "What kind of e-reader should I buy?", "best e-reader for reading at night", (
        ("screen type", "E-ink screens reflect light like paper and cause less eye strain than tablet screens."),
        ("night reading", "An adjustable warm front light helps when reading at night."),
        ("waterproofing", "Waterproof models suit reading in the bath or at the beach."),
        ("store lock-in", "A device tied to one store limits which e-book formats you can buy."),
        ("screen size", "Seven to eight inch screens suit PDFs and comics better than six inch screens."),
        ("note taking", "E-readers with a stylus for note taking cost noticeably more."),
        ("battery life", "E-reader battery life is measured in weeks rather than hours."),
    )),
    Topic("ds-laptop", "recommendation", "Which laptop is good for learning data science?", "laptop specs for data science student", (
        ("memory", "16 GB of RAM is a comfortable minimum for data frames and notebooks."),
        ("storage", "A solid-state drive makes loading datasets and environments faster."),
        ("GPU", "A dedicated NVIDIA GPU helps with deep learning because most frameworks support CUDA."),
        ("cloud alternative", "Cloud notebooks can replace a local GPU for occasional heavy training."),
        ("operating system", "Linux and macOS make command-line tooling easy to set up, and Windows offers WSL."),
        ("portability", "A light laptop with long battery life suits students who work on the go."),
    )),
    Topic("stress-hobbies", "recommendation", "What are good hobbies to unwind after work?", "relaxing hobbies after work stress", (
        ("exercise", "Regular aerobic exercise such as walking or cycling lowers stress hormones."),
        ("gardening", "Gardening combines light physical activity with time outdoors."),
        ("music", "Playing a musical instrument demands focus that crowds out worry."),
        ("journaling", "Journaling helps people process the events of the day."),
        ("cooking", "Cooking new recipes offers a creative outlet with a tangible result."),
        ("meditation", "Ten minutes of mindfulness meditation a day can reduce perceived stress."),
    )),
    Topic("inflation", "explanation", "What is inflation and why does it matter?", "inflation explained simply", (
        ("definition", "Inflation is a general rise in prices that reduces the purchasing power of money."),
        ("measurement", "The consumer price index tracks the cost of a fixed basket of goods and services."),
        ("targets", "Many central banks target an inflation rate of about 2 percent."),
        ("interest rates", "Raising interest rates is the main tool central banks use to slow inflation."),
        ("savings", "Cash savings lose real value when inflation exceeds the interest they earn."),
        ("hyperinflation", "Very high inflation, called hyperinflation, can destabilize an economy."),
    )),
    Topic("vaccines", "explanation", "How do vaccines work?", "how vaccines train the immune system", (
        ("exposure", "Vaccines expose the immune system to a harmless piece or version of a pathogen."),
        ("antibodies", "The immune system responds by producing antibodies and memory cells."),
        ("memory", "Memory cells allow a faster response when the real pathogen appears."),
        ("mRNA", "mRNA vaccines instruct cells to make a protein that triggers an immune response."),
        ("boosters", "Booster doses strengthen immunity that fades over time."),
        ("herd immunity", "When most people are immune, those who cannot be vaccinated are protected too."),
    )),
    Topic("machine-learning", "explanation", "What is machine learning?", "machine learning explained", (
        ("definition", "Machine learning builds programs that learn patterns from data instead of following hand-written rules."),
        ("supervised learning", "Supervised learning trains a model on examples labeled with the correct answer."),
        ("unsupervised learning", "Unsupervised learning finds structure such as clusters in unlabeled data."),
        ("overfitting", "Overfitting happens when a model memorizes its training data and does poorly on new data."),
        ("evaluation", "Models are evaluated on held-out test data they did not see during training."),
        ("deep learning", "Deep learning uses neural networks with many layers."),
    )),
)

PERSONAS: tuple[Persona, ...] = (
    Persona("high-school history teacher", "novice", "casual", "examples", ("board games", "hiking")),
    Persona("backend software engineer", "expert", "formal", "bullets", ("chess", "cycling")),
    Persona("nurse working night shifts", "novice", "casual", "steps", ("true-crime podcasts", "baking")),
    Persona("financial analyst", "expert", "formal", "summary", ("marathon running", "wine")),
    Persona("biology graduate student", "expert", "casual", "examples", ("birdwatching", "climbing")),
    Persona("retired accountant", "novice", "formal", "steps", ("gardening", "crosswords")),
    Persona("freelance graphic designer", "novice", "casual", "bullets", ("photography", "street food")),
    Persona("marketing manager", "expert", "casual", "summary", ("travel", "yoga")),
)

# What a user says in chats that reveals each trait (the evidence an agent should pick up).
TRAIT_CHATS: dict[tuple[str, str], tuple[str, str, str]] = {
    # (trait, value): (user turn, assistant turn, user follow-up)
    ("expertise", "novice"): (
        "Can you explain how {interest} rankings work? I'm a total beginner.",
        "Rankings use a rating system in which each result adjusts a player's score based on the opponent's rating and the expected outcome under a logistic model.",
        "That's way too technical for me. Please use plain words, I don't know any of the jargon.",
    ),
    ("expertise", "expert"): (
        "Quick one about {interest}: skip the basics, I know them. What are the real trade-offs people argue about?",
        "Sure! First, let's start with what {interest} is and why people enjoy it...",
        "I said skip the basics. Go straight to the detailed, specific points next time.",
    ),
    ("tone", "casual"): (
        "hey, any tips for getting into {interest}?",
        "Dear user, please find below a formal summary of recommended practices.",
        "lol you don't have to be so stiff, just talk to me like a friend 🙂",
    ),
    ("tone", "formal"): (
        "Please list reputable resources for {interest}.",
        "Ooh, great question!!! 🎉 You're gonna LOVE this, let's dive in!!",
        "Please keep it professional. No emojis or exclamation marks, just the information.",
    ),
    ("style", "examples"): (
        "What does a good weekly routine for {interest} look like?",
        "A good routine balances consistency, variety and rest across the week.",
        "That's abstract. I only get it with a concrete example, can you show me one?",
    ),
    ("style", "steps"): (
        "How do I get started with {interest}?",
        "Getting started involves gathering basic equipment, learning fundamentals and practising regularly while tracking progress.",
        "Can you turn that into numbered steps? I like to follow things one at a time.",
    ),
    ("style", "bullets"): (
        "What should I know before trying {interest}?",
        "There are a number of considerations worth keeping in mind, starting with cost, which varies widely, and then time commitment, which also depends on your goals...",
        "Too long. Short bullet points please, I skim everything.",
    ),
    ("style", "summary"): (
        "Is {interest} worth the money?",
        "It depends on many factors. On one hand, equipment can be expensive; on the other hand...",
        "Give me the bottom line first next time, then the details if I want them.",
    ),
}

# Sessions unrelated to any test query: the noise a retriever must skip.
NOISE_SEARCHES: tuple[tuple[str, str, str], ...] = (
    ("weather this weekend", "Weekend forecast", "Mostly sunny with a chance of showers on Sunday afternoon."),
    ("cheap flights lisbon", "Flight deals to Lisbon", "Fares from several European cities are lowest mid-week in spring."),
    ("how long to boil an egg", "Boiled egg timing guide", "Soft yolks take about six minutes, hard-boiled about ten."),
    ("football results yesterday", "Match results", "A roundup of last night's league matches and goal scorers."),
    ("best pizza near me", "Top pizza places", "Reviews of local pizzerias, ranked by crust and toppings."),
    ("movie showtimes tonight", "Cinema listings", "Tonight's screenings at nearby cinemas with ticket prices."),
    ("how to remove coffee stain", "Stain removal tips", "Blot the stain, rinse with cold water and apply a little dish soap."),
    ("library opening hours", "City library hours", "The central library opens at nine and closes at eight on weekdays."),
    ("repot a snake plant", "Repotting houseplants", "Use a slightly larger pot with drainage and a gritty potting mix."),
    ("translate thank you to japanese", "Common Japanese phrases", "Arigatou gozaimasu is a polite way to say thank you."),
)
NOISE_CHATS: tuple[tuple[str, str], ...] = (
    ("Write a short birthday message for my cousin.", "Happy birthday! Wishing you a year full of laughter and good surprises."),
    ("What's a good name for a grey cat?", "Some options: Smoky, Ash, Pebble, Earl Grey or Misty."),
    ("Convert 5 miles to kilometers.", "5 miles is about 8.05 kilometers."),
    ("Suggest a quick vegetarian dinner.", "Try a chickpea curry with spinach; it takes about 25 minutes."),
    ("Summarize the plot of a heist movie in one line.", "A crew plans one last job, and everything that can go wrong does."),
)

EXPERTISE_NEED = {
    "novice": "I'm not familiar with this area, so I need plain language without jargon.",
    "expert": "I already know the basics, so I want specific, detailed points rather than an introduction.",
}
TONE_NEED = {"casual": "A relaxed, friendly tone suits me.", "formal": "Please keep the tone professional and neutral."}
STYLE_NEED = {
    "examples": "Concrete examples help me understand.",
    "steps": "Numbered steps I can follow would be ideal.",
    "bullets": "Short bullet points work best for me.",
    "summary": "Put the bottom line first, then the details.",
}
STYLE_LABEL = {
    "examples": "a concrete example for each point",
    "steps": "numbered steps",
    "bullets": "short bullet points",
    "summary": "the bottom line first, then the details",
}
